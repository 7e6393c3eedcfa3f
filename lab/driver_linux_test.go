package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestRunAFXDP runs the default lab topology's proofs with the router's
// ports on af_xdp (copy mode on the veths' native XDP hook): the lab
// itself fails if a port fell back to af_packet, and the hook checks
// the status page's driver and mode of each port from outside, that the
// XDP program is attached while the router runs, and that RX VLAN
// stripping is off on the ports then.
func TestRunAFXDP(t *testing.T) {
	parallelLab(t)
	runAFXDP(t, TopologyVeth, natProofs)
}

// TestRunAFXDPBCM47094 is TestRunAFXDP on the appliance topology: the
// router's eth0 receives the emulated switch's 802.1Q-tagged frames on
// af_xdp, where tags stay in-band.
func TestRunAFXDPBCM47094(t *testing.T) {
	parallelLab(t)
	runAFXDP(t, TopologyBCM47094, natProofs)
}

// TestRunAFXDPMACsec is TestRunAFXDP on the MACsec topology: both
// routers' ports on af_xdp (the lab checks router 2's from its status
// page too), the SecYs' frames sealed and opened in the ports' frames.
func TestRunAFXDPMACsec(t *testing.T) {
	runAFXDP(t, TopologyMACsec, []string{
		"ok   ping LAN→WAN IPv4", "ok   ping WAN→LAN IPv6",
		"ok   TCP LAN→WAN IPv4", "ok   TCP WAN→LAN IPv6",
		"ok   fast path", "ok   router counters rose",
		"ok   kernel in router namespace forwarded nothing",
		"proofs passed",
	})
}

// natProofs are the proofs of the one-router topologies an af_xdp run
// must pass.
var natProofs = []string{
	"ok   ping LAN→WAN IPv4", "ok   ping LAN→WAN IPv6", "ok   ping WAN→LAN IPv6",
	"ok   TCP LAN→WAN IPv6", "ok   TCP WAN→LAN IPv6",
	"ok   masquerade: TCP LAN→WAN", "ok   port forward: TCP WAN→LAN", "ok   hairpin", "ok   UDP 3000-byte datagram",
	"ok   traceroute", "ok   fast path",
	"ok   status page from LAN host http://10.77.1.1/api/status",
	"ok   router counters rose",
	"ok   kernel in router namespace forwarded nothing",
	"proofs passed",
}

func runAFXDP(t *testing.T, topology string, proofs []string) {
	requirePrivileged(t, "ethtool")
	bin := buildRouter(t)
	port := freePort(t)
	var out bytes.Buffer
	hookRan := false
	tag := nextRunTag()
	opt := Options{
		runTag:       tag,
		RouterBinary: bin,
		StatusPort:   port,
		Topology:     topology,
		Driver:       DriverAFXDP,
		Log:          testLogger(t),
		Stdout:       &out,
		testHook: func(l *lab) error {
			hookRan = true
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/status", port))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var s status.Snapshot
			if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
				return fmt.Errorf("status JSON: %w", err)
			}
			got := map[string]string{}
			for _, p := range s.Ports {
				got[p.Name] = p.Driver + " (" + p.Mode + ")"
			}
			for _, dev := range routerPorts(topology) {
				if want := "af_xdp (copy, native)"; got[dev] != want {
					return fmt.Errorf("status: port %s driver %q, want %q (all: %v)", dev, got[dev], want, got)
				}
				link, err := output(context.Background(), l.rtrNS, "ip", "link", "show", "dev", dev)
				if err != nil {
					return err
				}
				if !strings.Contains(string(link), "xdp") {
					return fmt.Errorf("ip link show dev %s shows no XDP program:\n%s", dev, link)
				}
				if v, err := rxVLANOffload(l.rtrNS, dev); err != nil || v != "off" {
					return fmt.Errorf("%s rx-vlan-offload while the router runs = %q (%v), want off", dev, v, err)
				}
			}
			if l.rtr2NS != "" {
				return checkXDP(context.Background(), l.rtr2NS, wanPort, msPort)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	if !hookRan {
		t.Fatal("test hook did not run")
	}
	for _, want := range proofs {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if ns := runNamespaces(t, runPrefix(os.Getpid())+tag); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
}

// rxVLANOffload returns ifname's rx-vlan-offload in namespace ns as
// ethtool -k shows it, "on" or "off".
func rxVLANOffload(ns, ifname string) (string, error) {
	b, err := output(context.Background(), ns, "ethtool", "-k", ifname)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-offload: "); ok {
			return strings.Fields(v)[0], nil
		}
	}
	return "", fmt.Errorf("ethtool -k %s shows no rx-vlan-offload", ifname)
}
