package hw

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

// linkEventDeadline is how long a carrier change may take to reach the
// port's link state: the acceptance bound of the link-event work (a poll
// would take up to LinkPollInterval).
const linkEventDeadline = time.Second

// linkEvents installs a handler on p that sends each change, with the
// time it arrived, to the returned channel.
type linkEvent struct {
	up bool
	at time.Time
}

func linkEvents(p *Port) <-chan linkEvent {
	events := make(chan linkEvent, 16)
	p.SetLinkHandler(func(up bool) { events <- linkEvent{up, time.Now()} })
	return events
}

// waitLinkUp waits until p reports its link up: the kernel may mark a new
// veth running a moment after `ip link set up` returns.
func waitLinkUp(t *testing.T, p *Port, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); !p.LinkUp(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("LinkUp() = false on a veth whose peer is up")
		}
	}
}

func expectLink(t *testing.T, p *Port, events <-chan linkEvent, want bool, d time.Duration) linkEvent {
	t.Helper()
	select {
	case e := <-events:
		if e.up != want || p.LinkUp() != want {
			t.Fatalf("link handler got %v (LinkUp %v), want %v", e.up, p.LinkUp(), want)
		}
		return e
	case <-time.After(d):
		t.Fatalf("no link event within %v, want up=%v", d, want)
	}
	return linkEvent{}
}

// TestLinkEvents checks that a carrier change on a veth (its peer taken
// down and up) reaches the port's link state and handler within
// linkEventDeadline, and that the port learns it from its netlink
// subscription rather than from the fallback poll.
func TestLinkEvents(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	if !p.link.Subscribed() {
		t.Fatal("port has no netlink link subscription; it fell back to polling")
	}
	waitLinkUp(t, p, linkEventDeadline)
	events := linkEvents(p)
	for range 3 {
		start := time.Now()
		n.IP(t, "link", "set", "p0", "down")
		e := expectLink(t, p, events, false, linkEventDeadline)
		t.Logf("carrier loss seen after %v", e.at.Sub(start))
		n.IP(t, "link", "set", "p0", "up")
		expectLink(t, p, events, true, linkEventDeadline)
	}
	// The port's own admin state counts too.
	n.IP(t, "link", "set", "p1", "down")
	expectLink(t, p, events, false, linkEventDeadline)
	n.IP(t, "link", "set", "p1", "up")
	expectLink(t, p, events, true, linkEventDeadline)
}

// TestLinkPollFallback checks that a port whose subscription fails still
// follows its link, by polling.
func TestLinkPollFallback(t *testing.T) {
	privileged(t)
	orig := dialLinkEvents
	dialLinkEvents = func() (*rtnetlink.Conn, error) { return nil, errors.New("refused by the test") }
	t.Cleanup(func() { dialLinkEvents = orig })
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	if p.link.Subscribed() {
		t.Fatal("port has a subscription though dialing failed")
	}
	waitLinkUp(t, p, 3*LinkPollInterval)
	events := linkEvents(p)
	n.IP(t, "link", "set", "p0", "down")
	expectLink(t, p, events, false, 3*LinkPollInterval)
	n.IP(t, "link", "set", "p0", "up")
	expectLink(t, p, events, true, 3*LinkPollInterval)
}

// TestLinkEventLatency measures, over GVROUTER_LINK_FLAPS carrier flaps
// (scripts/link-latency.sh sets it; unset, 10: the test suite's smoke run,
// figures printed, the 1 s bound of TestLinkEvents the only gate), the time from the netlink
// request that takes the veth peer down or up to the port's handler
// call, and prints the median and the spread.
func TestLinkEventLatency(t *testing.T) {
	flaps, _ := strconv.Atoi(os.Getenv("GVROUTER_LINK_FLAPS"))
	if flaps <= 0 {
		flaps = 10
	}
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	if !p.link.Subscribed() {
		t.Fatal("port has no netlink link subscription")
	}
	waitLinkUp(t, p, linkEventDeadline)
	events := linkEvents(p)

	// The flapping socket is made in the namespace; it stays there.
	var c *rtnetlink.Conn
	var peer *net.Interface
	var err error
	n.Do(t, func() {
		if c, err = rtnetlink.Dial(nil); err == nil {
			peer, err = net.InterfaceByName("p0")
		}
	})
	if err != nil {
		t.Fatalf("rtnetlink in the namespace: %v", err)
	}
	defer c.Close()
	set := func(up bool) time.Time {
		var flags uint32
		if up {
			flags = unix.IFF_UP
		}
		start := time.Now()
		if err := c.Link.Set(&rtnetlink.LinkMessage{Family: unix.AF_UNSPEC, Index: uint32(peer.Index), Flags: flags, Change: unix.IFF_UP}); err != nil {
			t.Fatalf("set p0 up=%v: %v", up, err)
		}
		return start
	}
	var lat []time.Duration
	for range flaps {
		for _, up := range []bool{false, true} {
			start := set(up)
			e := expectLink(t, p, events, up, linkEventDeadline)
			lat = append(lat, e.at.Sub(start))
		}
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
	fmt.Printf("link event latency over %d flaps (%d changes): median %v, p90 %v, min %v, max %v\n",
		flaps, len(lat), q(0.5), q(0.9), lat[0], lat[len(lat)-1])
}
