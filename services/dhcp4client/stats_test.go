package dhcp4client

import (
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounters: the counters keep the names the status page and the
// metrics show (router/status's events and drops, page.js), and an
// exchange counts in them.
func TestCounters(t *testing.T) {
	wantEvents := []string{"discover", "offer", "request", "ack", "nak", "decline", "release", "renew", "rebind",
		"expired", "mtu_ignored", "lease_file_errors", "send_errors", "probe_errors"}
	wantDrops := []string{"malformed", "not_reply", "hwaddr", "unexpected", "xid", "type", "server_id", "client_id",
		"address", "lease_time"}
	if diff := cmp.Diff(wantEvents, svcstats.Names(&Stats{}, "events")); diff != "" {
		t.Errorf("event names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantDrops, svcstats.Names(&Stats{}, "drops")); diff != "" {
		t.Errorf("drop names (-want +got):\n%s", diff)
	}
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		d := h.one(dhcpv4.MessageTypeDiscover)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
		r := h.one(dhcpv4.MessageTypeRequest)
		ack := pkt(reply(r.msg, dhcpv4.MessageTypeAck, serverIP, offered), serverIP, serverMAC)
		h.inject(ack)
		h.inject(ack) // bound: no exchange is pending
		ev, drops := h.c.Stats().Counters(), h.c.Stats().DropCounts()
		for _, k := range []string{"discover", "offer", "request", "ack"} {
			if ev[k] != 1 {
				t.Errorf("Counters()[%q] = %d, want 1 (events %v)", k, ev[k], ev)
			}
		}
		if len(ev) != len(wantEvents) || len(drops) != len(wantDrops) {
			t.Errorf("Counters() = %v, DropCounts() = %v, want every counter listed", ev, drops)
		}
		if drops["unexpected"] != 1 {
			t.Errorf("DropCounts() = %v, want unexpected 1 (the repeated DHCPACK)", drops)
		}
	})
}
