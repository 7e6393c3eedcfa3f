package lab

import (
	"strings"
)

// The DNS forwarder proofs' records on the lab ISP.
const (
	// ispBigName has a TXT record larger than the forwarder's EDNS0 UDP
	// size (1232): the ISP answers it over UDP truncated (TC), and the
	// forwarder must retry over TCP.
	ispBigName = "big." + ispZone
	// ispBigStrings and ispBigLen are its character strings.
	ispBigStrings, ispBigLen = 6, 240
)

// ispBigTXTRecord is dnsmasq's txt-record lines for ispBigName: two TXT
// records of three strings each, as dnsmasq reads lines of at most about
// 1 KiB.
func ispBigTXTRecord() string {
	var lines []string
	for r := range 2 {
		parts := make([]string, ispBigStrings/2)
		for i := range parts {
			parts[i] = strings.Repeat(string(rune('a'+r*len(parts)+i)), ispBigLen)
		}
		lines = append(lines, "txt-record="+ispBigName+","+strings.Join(parts, ","))
	}
	return strings.Join(lines, "\n")
}
