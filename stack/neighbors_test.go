package stack

import (
	"slices"
	"testing"
)

// TestNeighbors6: after a host on the LAN pinged the router over IPv6,
// the LAN interface's neighbour cache names the host's address with its
// MAC; the WAN interface, which heard nothing from it, does not.
func TestNeighbors6(t *testing.T) {
	l := newLab(t)
	if got := l.r.Interface("lan").Neighbors6(); slices.ContainsFunc(got, func(n Neighbor) bool { return n.Addr == aIP6 }) {
		t.Fatalf("neighbour %s known before any traffic: %v", aIP6, got)
	}
	ping(t, l.a, lanIP6)
	got := l.r.Interface("lan").Neighbors6()
	i := slices.IndexFunc(got, func(n Neighbor) bool { return n.Addr == aIP6 })
	if i < 0 || got[i].MAC.String() != aMAC.String() {
		t.Errorf("lan neighbours = %v, want %s at %s", got, aIP6, aMAC)
	}
	if w := l.r.Interface("wan").Neighbors6(); slices.ContainsFunc(w, func(n Neighbor) bool { return n.Addr == aIP6 }) {
		t.Errorf("wan neighbours = %v, has the LAN host", w)
	}
}
