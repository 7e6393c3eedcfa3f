package dhcp6client

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/gvrouter/gvrouter/statedir"
)

// DUID facts (RFC 8415 §11).
const (
	duidLLT = 1 // DUID-LLT: link-layer address plus time (§11.2)
	duidLL  = 3 // DUID-LL: link-layer address (§11.4)
	// hwEthernet is the hardware type of Ethernet (RFC 826, IANA
	// arp-parameters), the type in our DUIDs.
	hwEthernet = 1
	// maxDUIDLen is the longest DUID: a 2-octet type and at most 128
	// octets more (§11.1).
	maxDUIDLen = 130
)

// duidEpoch is the origin of a DUID-LLT's time: midnight UTC, 1 January
// 2000 (§11.2).
var duidEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// duidLLOf is the DUID-LL of an Ethernet MAC.
func duidLLOf(mac net.HardwareAddr) []byte {
	b := binary.BigEndian.AppendUint16(nil, duidLL)
	b = binary.BigEndian.AppendUint16(b, hwEthernet)
	return append(b, mac...)
}

// duidLLTOf is the DUID-LLT of an Ethernet MAC made at now.
func duidLLTOf(mac net.HardwareAddr, now time.Time) []byte {
	b := binary.BigEndian.AppendUint16(nil, duidLLT)
	b = binary.BigEndian.AppendUint16(b, hwEthernet)
	b = binary.BigEndian.AppendUint32(b, uint32(uint64(now.Sub(duidEpoch)/time.Second)))
	return append(b, mac...)
}

// validDUID reports what is wrong with d as a DUID, if anything: its
// length, or a DUID-LLT or DUID-LL without a whole link-layer header.
func validDUID(d []byte) error {
	if len(d) < 3 || len(d) > maxDUIDLen {
		return fmt.Errorf("DUID of %d octets, want 3 to %d (RFC 8415 §11.1)", len(d), maxDUIDLen)
	}
	switch binary.BigEndian.Uint16(d) {
	case duidLLT:
		if len(d) < 9 {
			return errors.New("DUID-LLT without a link-layer address")
		}
	case duidLL:
		if len(d) < 5 {
			return errors.New("DUID-LL without a link-layer address")
		}
	}
	return nil
}

// encodeDUIDFile is the DUID file's content: the DUID in hex and a
// newline, as an operator would paste it into a server's reservation.
func encodeDUIDFile(d []byte) []byte { return []byte(hex.EncodeToString(d) + "\n") }

// decodeDUIDFile parses a DUID file.
func decodeDUIDFile(data []byte) ([]byte, error) {
	d, err := hex.DecodeString(string(bytes.TrimSpace(data)))
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := validDUID(d); err != nil {
		return nil, err
	}
	return d, nil
}

// loadDUID returns the client's DUID: the one in path when it holds a
// valid one; else a new DUID-LLT of mac at now (RFC 8415 §11.2, for a
// device with stable storage), written to path atomically. Without path
// it is the DUID-LL of mac (§11.4, for one without), the same after every
// restart. A corrupt file is reported in fileErr and replaced; writeErr
// is a failure to save the new DUID, which is then used anyway.
func loadDUID(path string, mac net.HardwareAddr, now time.Time) (duid []byte, fileErr, writeErr error) {
	if path == "" {
		return duidLLOf(mac), nil, nil
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		d, err := decodeDUIDFile(data)
		if err == nil {
			return d, nil, nil
		}
		fileErr = fmt.Errorf("corrupt, replaced: %w", err)
	case !errors.Is(err, os.ErrNotExist):
		fileErr = fmt.Errorf("unreadable, replaced: %w", err)
	}
	duid = duidLLTOf(mac, now)
	writeErr = statedir.WriteFile(path, encodeDUIDFile(duid), 0o644)
	return duid, fileErr, writeErr
}
