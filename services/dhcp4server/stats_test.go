package dhcp4server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounters: the counters keep the names the status page and the
// metrics show (router/status's events and drops, page.js), and an
// exchange counts in them.
func TestCounters(t *testing.T) {
	want := []string{"received", "discover", "request", "decline", "release", "inform", "offer", "ack", "nak",
		"pool_exhausted", "other_server", "no_record", "expired", "send_errors", "lease_writes",
		"lease_write_errors", "lease_file_corrupt"}
	if diff := cmp.Diff(want, svcstats.Names(&Stats{}, "events")); diff != "" {
		t.Errorf("event names (-want +got):\n%s", diff)
	}
	s, _ := newTestServer(t, testConfig(5))
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1)))); m == nil {
		t.Fatal("no OFFER")
	}
	bad := bcast(msg(dhcpv4.MessageTypeDiscover, mac(2)))
	bad.Payload[236] ^= 0xff // the magic cookie (RFC 2131 §3)
	exchange(t, s, bad)
	ev, drops := s.Stats().Counters(), s.Stats().DropCounts()
	for k, n := range map[string]uint64{"received": 2, "discover": 1, "offer": 1, "ack": 0} {
		if ev[k] != n {
			t.Errorf("Counters()[%q] = %d, want %d (events %v)", k, ev[k], n, ev)
		}
	}
	if len(ev) != len(want) || len(drops) != int(NumDropReasons) {
		t.Errorf("Counters() = %v, DropCounts() = %v, want every counter listed", ev, drops)
	}
	if drops["wrong_magic_cookie"] != 1 {
		t.Errorf("DropCounts() = %v, want wrong_magic_cookie 1", drops)
	}
}

// TestStatusJSON: Status is what /api/status shows for a LAN server
// (router/status embeds it): the keys page.js and the lab read, a MAC as
// text, the counters included, and it decodes back as it was.
func TestStatusJSON(t *testing.T) {
	s, _ := newTestServer(t, testConfig(5))
	m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1))))
	if m == nil {
		t.Fatal("no OFFER")
	}
	st := s.Status()
	if st.Counters["offer"] != 1 || st.Drops == nil {
		t.Fatalf("Status() counters %v drops %v, want offer 1 and the drops listed", st.Counters, st.Drops)
	}
	st.Leases = []Lease{{MAC: MAC(mac(1)), Addr: st.RangeStart, Hostname: "desk", State: LeaseBound}}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pool_start", "pool_end", "pool_size", "pool_used", "offered", "declined",
		"leases", "lease_file_error", "counters", "drops"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON %s has no key %q", raw, k)
		}
	}
	if want := `{"mac":"` + mac(1).String() + `","address":"` + st.RangeStart.String() +
		`","hostname":"desk","static":false,"state":"bound"}`; string(keys["leases"]) != "["+want+"]" {
		t.Errorf("JSON leases = %s, want [%s]", keys["leases"], want)
	}
	var back Status
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, back) {
		t.Errorf("Status after a JSON round trip = %+v, want %+v", back, st)
	}
}
