package takeover

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sample() *Record {
	return &Record{
		Version: Version, Port: "eth0", BootID: "b0", Netns: 4026531840, Ifindex: 2, MAC: "02:00:00:00:00:01",
		Since: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC), PID: 42, MTU: 1500,
		Features:    map[string]bool{"rx-gro": true},
		DisableIPv6: "0",
		Addresses: []Address{
			{Family: "inet", Local: netip.MustParsePrefix("192.168.1.1/24"), Broadcast: netip.MustParseAddr("192.168.1.255"),
				Label: "eth0", Scope: "global", Flags: []string{"permanent"}},
			{Family: "inet", Local: netip.MustParsePrefix("10.0.0.1/32"), Peer: netip.MustParseAddr("10.0.0.2"), Scope: "global",
				ValidUntil: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC), PreferredUntil: time.Date(2026, 12, 1, 19, 30, 0, 0, time.UTC)},
			{Family: "inet6", Local: netip.MustParsePrefix("fe80::1/64"), Scope: "link", Flags: []string{"permanent"}, Protocol: 3, Generated: true},
		},
		NFTables:  []NFTable{{Family: "netdev", Name: "gvrouter_hw_2"}},
		TCQdiscs:  []TCQdisc{{Kind: "clsact", Handle: "ffff:", Parent: "ffff:fff1"}},
		TCFilters: []TCFilter{{Parent: "ingress", Pref: 49374, Handle: "1", Kind: "bpf"}},
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load("eth0"); r != nil || err != nil {
		t.Fatalf("Load of no record = %v, %v; want nil, nil", r, err)
	}
	want := sample()
	if err := s.Save(want); err != nil {
		t.Fatalf("Save = %v", err)
	}
	got, err := s.Load("eth0")
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("Load after Save = %+v, want %+v", got, want)
	}
	if ports, err := s.Ports(); err != nil || len(ports) != 1 || ports[0] != "eth0" {
		t.Errorf("Ports() = %v, %v; want [eth0]", ports, err)
	}
	if err := s.Remove("eth0"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load("eth0"); r != nil || err != nil {
		t.Errorf("Load after Remove = %v, %v; want nil, nil", r, err)
	}
}

// TestStoreCorrupt checks that a truncated, empty or foreign file is
// reported as ErrCorrupt (never a panic) and can be set aside, and that an
// unknown version is refused with a VersionError.
func TestStoreCorrupt(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(s.Path("eth0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, data string
	}{
		{"empty", ""},
		{"truncated", string(full[:len(full)/2])},
		{"truncated at the end", string(full[:len(full)-3])},
		{"not json", "\x00\x01garbage"},
		{"no version", `{"port": "eth0"}`},
		{"other port", strings.Replace(string(full), `"port": "eth0"`, `"port": "eth1"`, 1)},
		{"bad address family", strings.Replace(string(full), `"family": "inet6"`, `"family": "ipx"`, 1)},
		{"wrong type", `{"version": 1, "port": "eth0", "mtu": "big"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(s.Path("eth0"), []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.Load("eth0")
			if !errors.Is(err, ErrCorrupt) || r != nil || !strings.Contains(err.Error(), s.Path("eth0")) {
				t.Fatalf("Load(%s) = %v, %v; want ErrCorrupt naming the file", tt.name, r, err)
			}
			to, err := s.SetAside("eth0")
			if err != nil {
				t.Fatalf("SetAside = %v", err)
			}
			if b, err := os.ReadFile(to); err != nil || string(b) != tt.data {
				t.Errorf("set-aside file %s = %q, %v; want the corrupt content", to, b, err)
			}
			if r, err := s.Load("eth0"); r != nil || err != nil {
				t.Errorf("Load after SetAside = %v, %v; want no record", r, err)
			}
			os.Remove(to)
		})
	}
	if err := os.WriteFile(s.Path("eth0"), []byte(`{"version": 2, "port": "eth0", "new_thing": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load("eth0")
	var verr *VersionError
	if !errors.As(err, &verr) || verr.Version != 2 || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Load(version 2) = %v, want a VersionError for version 2", err)
	}
}

func TestRecordMerge(t *testing.T) {
	r := &Record{Port: "eth0"}
	if !r.Empty() {
		t.Error("new record not Empty")
	}
	a := Address{Family: "inet", Local: netip.MustParsePrefix("10.0.0.1/24"), Scope: "global"}
	if !r.AddAddress(a) || r.AddAddress(a) {
		t.Error("AddAddress twice: want true then false")
	}
	if !r.SetFeature("rx-gro", true) || r.SetFeature("rx-gro", false) || !r.Features["rx-gro"] {
		t.Errorf("SetFeature: the first value must win, got %v", r.Features)
	}
	if r.Empty() {
		t.Error("record with changes is Empty")
	}
}
