package netnstest

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestNetns(t *testing.T) {
	Privileged(t, "ip")
	var name string
	t.Run("namespace", func(t *testing.T) {
		n := New(t, "nst", WithoutIPv6())
		name = n.Name()
		if !strings.HasPrefix(name, "nst-") {
			t.Errorf("Name() = %q, want nst-PID-N", name)
		}
		if _, err := os.Stat("/run/netns/" + name); err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		if v := n.Sysctl(t, "/proc/sys/net/ipv6/conf/default/disable_ipv6"); v != "1" {
			t.Errorf("default disable_ipv6 = %s with WithoutIPv6, want 1", v)
		}
		if out := n.Run(t, "cat", "/sys/class/net/lo/operstate"); strings.TrimSpace(out) != "unknown" {
			t.Errorf("lo operstate = %q, want unknown (up)", out)
		}
		if other := New(t, "nst"); other.Sysctl(t, "/proc/sys/net/ipv6/conf/default/disable_ipv6") != "0" || other.Name() == name {
			t.Errorf("second namespace %s shares the first's name or settings", other.Name())
		}

		n.IP(t, "link", "add", "va", "type", "veth", "peer", "name", "vb")
		n.IP(t, "link", "set", "va", "up")
		n.IP(t, "link", "set", "vb", "up")
		a, b := n.RawSocket(t, "va"), n.RawSocket(t, "vb")
		if a.Netns != name {
			t.Errorf("RawSocket().Netns = %q, want %q", a.Netns, name)
		}
		f := Frame(Broadcast, []byte{0x02, 0, 0, 0, 0, 0x0a}, "netnstest")
		a.Send(t, Tag(f, 0x8100, 0x2005))
		got, ok := b.WaitFor("netnstest", 2*time.Second)
		if !ok {
			t.Fatal("frame from a did not reach b")
		}
		if got.VLANValid {
			// Without rx VLAN offload the tag stays in-band.
			if got.TCI != 0x2005 || got.TPID != 0x8100 || string(got.Data) != string(f) {
				t.Errorf("b got VLAN %#x/%#x data % x; want 0x2005/0x8100 and % x", got.TCI, got.TPID, got.Data, f)
			}
		} else if string(got.Data) != string(Tag(f, 0x8100, 0x2005)) {
			t.Errorf("b got untagged data % x, want the tag in-band", got.Data)
		}
		if _, ok := a.WaitFor("netnstest", 200*time.Millisecond); ok {
			t.Error("a saw its own frame; outgoing frames must be passed over")
		}

		// A PacketSocket for the test EtherType on vb gets a's frame,
		// and its receive gives up after its timeout.
		fd := n.PacketSocket(t, "vb", EtherTypeExperimental)
		defer unix.Close(fd)
		a.Send(t, f)
		buf := make([]byte, 1514)
		nr, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || string(buf[:nr]) != string(f) {
			t.Errorf("PacketSocket read % x, %v; want % x", buf[:max(nr, 0)], err, f)
		}
		start := time.Now()
		if _, _, err := unix.Recvfrom(fd, buf, 0); err != unix.EAGAIN || time.Since(start) > time.Second {
			t.Errorf("idle PacketSocket read = %v after %v, want EAGAIN within a second", err, time.Since(start))
		}
	})
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Errorf("namespace %s after its test ended: %v, want it deleted", name, err)
	}
}
