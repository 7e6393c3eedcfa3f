package svcconfig

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestList(t *testing.T) {
	if err := NewList("svc").Err(); err != nil {
		t.Errorf("empty List.Err() = %v, want nil", err)
	}
	l := NewList("dhcp4server")
	l.Add("range", "%s-%s: the first address is above the last", "10.0.0.9", "10.0.0.1")
	l.AddClash(Key("static", 1, "mac"), Key("static", 0, "mac"), "%s is listed twice", "02:00:00:00:00:10")
	l.Add("", "no subnet")
	err := l.Err()
	want := "dhcp4server: range: 10.0.0.9-10.0.0.1: the first address is above the last\n" +
		"dhcp4server: static.1.mac: 02:00:00:00:00:10 is listed twice (also static.0.mac)\n" +
		"dhcp4server: no subnet"
	if err == nil || err.Error() != want {
		t.Errorf("Err() = %q, want %q", err, want)
	}
	var keys []string
	for _, fe := range Fields(fmt.Errorf("wrapped: %w", err)) {
		keys = append(keys, fe.Key+"|"+fe.Other)
	}
	if diff := cmp.Diff([]string{"range|", "static.1.mac|static.0.mac", "|"}, keys); diff != "" {
		t.Errorf("Fields keys (-want +got):\n%s", diff)
	}
}

func TestFieldsAndOthers(t *testing.T) {
	fe := &FieldError{Service: "s", Key: "mtu", Msg: "500 out of range"}
	plain := errors.New("dnsforward: DialUDP is required")
	for _, tc := range []struct {
		name   string
		err    error
		fields int
		others int
	}{
		{"nil", nil, 0, 0},
		{"one", fe, 1, 0},
		{"wrapped", fmt.Errorf("x: %w", fe), 1, 0},
		{"joined", errors.Join(fe, plain, fe), 2, 1},
		{"plain", plain, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(Fields(tc.err)); got != tc.fields {
				t.Errorf("len(Fields(%v)) = %d, want %d", tc.err, got, tc.fields)
			}
			if got := len(Others(tc.err)); got != tc.others {
				t.Errorf("len(Others(%v)) = %d, want %d", tc.err, got, tc.others)
			}
		})
	}
}

func TestKeyPaths(t *testing.T) {
	if got := Key("static", 1, "address"); got != "static.1.address" {
		t.Errorf(`Key("static", 1, "address") = %q, want "static.1.address"`, got)
	}
	for _, tc := range []struct {
		key, first string
		i          int
		sub        string
		ok         bool
	}{
		{"static.1.address", "static", 1, "address", true},
		{"routes.0", "routes", 0, "", true},
		{"cache.max_ttl", "cache", 0, "", false},
		{"range", "range", 0, "", false},
	} {
		first, rest := Split(tc.key)
		i, sub, ok := Index(rest)
		if first != tc.first || ok != tc.ok || ok && (i != tc.i || sub != tc.sub) {
			t.Errorf("Split, Index(%q) = %q, %d, %q, %v; want %q, %d, %q, %v", tc.key, first, i, sub, ok, tc.first, tc.i, tc.sub, tc.ok)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second: "10s", time.Hour: "1h", 8760 * time.Hour: "8760h", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
