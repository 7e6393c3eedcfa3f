package dhcp6client

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestStatusJSON pins the keys the status page and the lab read
// (router/status DHCPv6Client embeds Status as it is) and the round trip.
func TestStatusJSON(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	st := Status{
		State: "bound",
		Lease: &Lease{
			Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56"), PreferredUntil: now.Add(time.Hour), ValidUntil: now.Add(2 * time.Hour)}},
			Address:  &Address{Addr: netip.MustParseAddr("2001:db8::17")},
			DNS:      []netip.Addr{netip.MustParseAddr("2001:db8::53")}, Domains: []string{"isp.example"},
			T1: now.Add(30 * time.Minute), T2: now.Add(48 * time.Minute),
		},
		DUID: DUID{0, 3, 0, 1, 2, 0, 0, 0, 0, 1}, Server: DUID{0, 3, 0, 1, 2, 0, 0, 0, 0, 0xaa},
		Counters: map[string]uint64{"solicit": 1}, Drops: map[string]uint64{"wrong_xid": 3},
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"state":"bound"`, `"prefixes":[{"prefix":"2001:db8:aa00::/56"`, `"preferred_until":`, `"valid_until":`,
		`"address":"2001:db8::17"`, `"dns":["2001:db8::53"]`, `"domains":["isp.example"]`, `"renew":`, `"rebind":`,
		`"duid":"00030001020000000001"`, `"server_duid":"000300010200000000aa"`, `"counters":{"solicit":1}`, `"drops":{"wrong_xid":3}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if back.State != st.State || back.Lease == nil || back.Prefixes[0] != st.Prefixes[0] || back.Address.Addr != st.Address.Addr ||
		back.DUID.String() != st.DUID.String() || back.Server.String() != st.Server.String() || !back.T1.Equal(st.T1) {
		t.Errorf("round trip: %+v, want %+v", back, st)
	}
	// No lease: the lease's keys are left out, nothing panics.
	b, err = json.Marshal(Status{State: "solicit"})
	if err != nil || strings.Contains(string(b), "prefixes") {
		t.Errorf("without a lease: %s, %v", b, err)
	}
}
