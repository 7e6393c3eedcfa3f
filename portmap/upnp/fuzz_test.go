package upnp

import (
	"strings"
	"testing"
)

// FuzzParseSearch: the SSDP parser never panics, and what it accepts
// has a search target and a non-negative MX.
func FuzzParseSearch(f *testing.F) {
	f.Add(search("ssdp:all"))
	f.Add(search("urn:schemas-upnp-org:device:InternetGatewayDevice:1"))
	f.Add([]byte("NOTIFY * HTTP/1.1\r\n\r\n"))
	f.Add([]byte("M-SEARCH * HTTP/1.1\r\nMAN: ssdp:discover\r\nST: x\r\nMX: 99999999999999999999\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSearch(b)
		if err == nil && (s.ST == "" || s.MX < 0 || len(b) > maxSearchLen) {
			t.Fatalf("ParseSearch(%q) = %+v", b, s)
		}
	})
}

// FuzzParseAction: the SOAP parser never panics and keeps its bounds; an
// action it accepts re-encoded parses to the same action.
func FuzzParseAction(f *testing.F) {
	f.Add([]byte(soap("AddPortMapping", addArgs("3074", "TCP", "192.168.1.10", "3074", "3600")...)))
	f.Add([]byte(soap("GetGenericPortMappingEntry", "NewPortMappingIndex", "0")))
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE x><a/>`))
	f.Add([]byte(`<s:Envelope><s:Body><u:A><B>&amp;&lt;</B></u:A></s:Body></s:Envelope>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAction(b)
		if err != nil {
			return
		}
		if len(a.Args) > maxSOAPArgs {
			t.Fatalf("%d args", len(a.Args))
		}
		var args []string
		for k, v := range a.Args {
			if len(v) > maxArgLen {
				t.Fatalf("arg %s: %d bytes", k, len(v))
			}
			args = append(args, k, v)
		}
		if strings.ContainsAny(a.Name, "<>& ") {
			return
		}
		// Re-encode with escaped values; names come from element names.
		enc := actionResponse(serviceIPv1, a.Name, args...)
		b2, err := ParseAction(enc)
		if err != nil || b2.Name != a.Name+"Response" || len(b2.Args) != len(a.Args) {
			t.Fatalf("re-encoded %q: %+v, %v", enc, b2, err)
		}
	})
}
