// Package upnp is a UPnP IGD server (Internet Gateway Device v1,
// WANIPConnection:1) on the port mapping table of package portmap: the
// SSDP M-SEARCH responder, the device description and the SOAP control
// actions consoles and games use (AddPortMapping, DeletePortMapping,
// GetExternalIPAddress, GetSpecificPortMappingEntry,
// GetGenericPortMappingEntry, and GetStatusInfo, which clients ask
// before they trust a gateway).
//
// # Hardening
//
// Everything answers inside hosts only (Server.Inside), on sockets the
// caller binds to LAN-side addresses: in 2013 81 million devices
// answered SSDP from the Internet. The parsers are bounded (datagram and
// body sizes, header counts, XML depth and tokens) and fuzzed. Eventing
// is not offered: a SUBSCRIBE whose callback leaves the inside prefixes
// is refused with 412 (CallStranger, CVE-2020-12695, which UDA 2.0 now
// forbids), one inside is refused with 501 too, so the router never
// sends a NOTIFY anywhere. The description says IGD v1, which Windows
// and Xbox handle (IGD v2 broke them: openwrt/routing#172); an M-SEARCH
// for the v2 types is answered with the same v1 device.
package upnp

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// SSDP's group and port (UPnP Device Architecture 1.1 section 1).
var SSDPGroup = netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 255, 255, 250}), 1900)

// SSDP limits: a search fits one datagram; more header lines than this
// is not a search a client sends.
const (
	maxSearchLen     = 1500
	maxSearchHeaders = 32
	ssdpMaxAge       = 120 // CACHE-CONTROL max-age of a search answer, seconds
)

// Search targets the device answers, UDA 1.1 section 1.3.2: the device
// and its services, v1 and (answered with the v1 device) v2.
var searchTargets = []string{
	"upnp:rootdevice",
	"urn:schemas-upnp-org:device:InternetGatewayDevice:1",
	"urn:schemas-upnp-org:device:InternetGatewayDevice:2",
	"urn:schemas-upnp-org:device:WANDevice:1",
	"urn:schemas-upnp-org:device:WANConnectionDevice:1",
	"urn:schemas-upnp-org:service:WANIPConnection:1",
	"urn:schemas-upnp-org:service:WANIPConnection:2",
	"urn:schemas-upnp-org:service:WANCommonInterfaceConfig:1",
}

// Search is a parsed M-SEARCH request.
type Search struct {
	ST string // search target, e.g. "ssdp:all"
	MX int    // seconds the answer may be delayed, 0 for a unicast search
}

// ParseSearch parses an SSDP M-SEARCH (HTTP over UDP). It accepts only
// "M-SEARCH * HTTP/1.1" with MAN "ssdp:discover" and an ST, within the
// size and header limits.
func ParseSearch(b []byte) (Search, error) {
	var s Search
	if len(b) > maxSearchLen {
		return s, fmt.Errorf("upnp: ssdp: %d bytes", len(b))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 256), maxSearchLen)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "M-SEARCH * HTTP/1.1" {
		return s, fmt.Errorf("upnp: ssdp: not an M-SEARCH")
	}
	man := false
	for n := 0; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			break
		}
		if n >= maxSearchHeaders {
			return s, fmt.Errorf("upnp: ssdp: more than %d headers", maxSearchHeaders)
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return s, fmt.Errorf("upnp: ssdp: header %q", line)
		}
		v = strings.TrimSpace(v)
		switch strings.ToUpper(strings.TrimSpace(k)) {
		case "MAN":
			man = strings.Trim(v, `"`) == "ssdp:discover"
		case "ST":
			s.ST = v
		case "MX":
			mx, err := strconv.Atoi(v)
			if err != nil || mx < 0 {
				return s, fmt.Errorf("upnp: ssdp: MX %q", v)
			}
			s.MX = mx
		}
	}
	if !man || s.ST == "" {
		return s, fmt.Errorf("upnp: ssdp: no MAN ssdp:discover or no ST")
	}
	return s, nil
}

// matches returns the search targets to answer s with: one answer per
// target for ssdp:all, else the one asked for if the device has it.
func (d *Device) matches(s Search) []string {
	switch {
	case s.ST == "ssdp:all":
		return append(searchTargets[:1:1], append([]string{"uuid:" + d.UUID}, searchTargets[1:]...)...)
	case s.ST == "uuid:"+d.UUID:
		return []string{s.ST}
	}
	for _, t := range searchTargets {
		if strings.EqualFold(s.ST, t) {
			return []string{t}
		}
	}
	return nil
}

// searchResponse is one answer to an M-SEARCH (UDA 1.1 section 1.3.3).
func (d *Device) searchResponse(st string, location string) []byte {
	usn := "uuid:" + d.UUID
	if st != usn {
		usn += "::" + st
	}
	return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=%d\r\nST: %s\r\nUSN: %s\r\nEXT:\r\nSERVER: %s\r\nLOCATION: %s\r\nContent-Length: 0\r\n\r\n",
		ssdpMaxAge, st, usn, serverHeader, location)
}
