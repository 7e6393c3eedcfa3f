package mka

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// writePcap writes frames as a classic pcap file (Ethernet link type).
func writePcap(t *testing.T, path string, frames ...[]byte) {
	t.Helper()
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 1)
	for i, f := range frames {
		b = binary.LittleEndian.AppendUint32(b, uint32(i+1))
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTsharkDissects has Wireshark's MKA dissector (an independent
// decoder, packet-mka.c) read an MKPDU we encoded with every parameter
// set, and compares the fields it reports with what we put in.
func TestTsharkDissects(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		netnstest.SkipOrFail(t, "tshark not installed: %v", err)
	}
	k := testICVKey(t)
	frame, err := fullMKPDU(t).Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(t.TempDir(), "mka.pcap")
	writePcap(t, pcap, frame)
	fields := []string{
		"eapol.version", "eapol.type", "mka.version_id", "mka.ks_prio", "mka.key_server", "mka.macsec_desired",
		"mka.macsec_capability", "mka.sci", "mka.actor_mi", "mka.actor_mn", "mka.algo_agility", "mka.cak_name",
		"mka.peer_mi", "mka.peer_mn", "mka.latest_key_an", "mka.latest_key_tx", "mka.latest_key_rx",
		"mka.old_key_an", "mka.old_key_tx", "mka.old_key_rx", "mka.delay_protect", "mka.latest_key_server_mi",
		"mka.latest_key_number", "mka.latest_lowest_acceptable_pn", "mka.old_key_number",
		"mka.old_lowest_acceptable_pn", "mka.distributed_an", "mka.confidentiality_offset", "mka.key_number",
		"mka.macsec_cipher_suite", "mka.aes_key_wrap_sak", "mka.icv", "_ws.malformed", "_ws.expert.severity",
	}
	args := []string{"-r", pcap, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "|")
	if len(vals) != len(fields) {
		t.Fatalf("tshark printed %q, want %d fields", out, len(fields))
	}
	for i, f := range fields {
		got[f] = vals[i]
	}
	// tshark prints 4-octet fields in hex; the XPN set's high PN halves
	// show up as second lowest-PN values; the suite id is printed in
	// decimal (0x0080c20001000004).
	want := map[string]string{
		"eapol.version": "3", "eapol.type": "5", "mka.version_id": "3", "mka.ks_prio": "16",
		"mka.key_server": "1", "mka.macsec_desired": "1", "mka.macsec_capability": "2",
		"mka.sci": "5254001234560001", "mka.actor_mi": "0102030405060708090a0b0c", "mka.actor_mn": "00000007",
		"mka.algo_agility": "0x0080c201", "mka.cak_name": "616263",
		"mka.peer_mi":       "a1a2a3a4a5a6a7a8a9aaabac,b1b2b3b4b5b6b7b8b9babbbc,a1a2a3a4a5a6a7a8a9aaabac",
		"mka.peer_mn":       "00000063,00000001,00000002",
		"mka.latest_key_an": "2", "mka.latest_key_tx": "1", "mka.latest_key_rx": "1",
		"mka.old_key_an": "1", "mka.old_key_tx": "0", "mka.old_key_rx": "1", "mka.delay_protect": "1",
		"mka.latest_key_server_mi": "0102030405060708090a0b0c", "mka.latest_key_number": "00000005",
		"mka.latest_lowest_acceptable_pn": "00001234,00000001", "mka.old_key_number": "00000004",
		"mka.old_lowest_acceptable_pn": "fffffff0,00000002", "mka.distributed_an": "2",
		"mka.confidentiality_offset": "1", "mka.key_number": "00000005", "mka.macsec_cipher_suite": "36242102291529732",
		"mka.aes_key_wrap_sak": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
		"mka.icv":              strings.TrimSpace(strings.ToLower(string(hexOf(frame[len(frame)-ICVLen:])))),
		"_ws.malformed":        "", "_ws.expert.severity": "",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tshark's view of our MKPDU (-want +got):\n%s", d)
	}
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}
