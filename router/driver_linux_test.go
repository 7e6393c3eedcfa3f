package router

import (
	"fmt"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortDriver starts a router on a veth with each driver setting and
// checks the backend it chose and what the status snapshot says: af_xdp
// binds in copy mode on veth's native XDP; auto wants zero-copy, which
// veth lacks, so it falls back to af_packet, as the generic profile's
// default does.
func TestPortDriver(t *testing.T) {
	netnstest.Privileged(t, "ip", "ping")
	for _, tc := range []struct {
		driver, wantDriver, wantMode string
	}{
		{config.DriverAFXDP, config.DriverAFXDP, "copy, native"},
		{config.DriverAuto, config.DriverAFPacket, ""},
		{"", config.DriverAFPacket, ""},
	} {
		t.Run("driver="+tc.driver, func(t *testing.T) {
			ns := netnstest.New(t, "drv", netnstest.WithoutIPv6())
			ns.IP(t, "link", "add", "va", "type", "veth", "peer", "name", "vb")
			ns.IP(t, "link", "set", "va", "up")
			ns.IP(t, "link", "set", "vb", "up")
			drv := ""
			if tc.driver != "" {
				drv = ", driver: " + tc.driver
			}
			src := fmt.Sprintf("ports:\n  - {name: va%s}\ninterfaces:\n  - {name: lan, port: va, role: lan, addresses: [192.168.77.1/24]}\nstate_dir: %s\n", drv, t.TempDir())
			cfg, err := config.Parse("driver.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var r *Router
			ns.Do(t, func() { r, err = New(cfg, Build{}, slog.New(slog.DiscardHandler)) })
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer r.Close()
			snap := r.Snapshot()
			if len(snap.Ports) != 1 {
				t.Fatalf("Snapshot().Ports = %+v, want one port", snap.Ports)
			}
			if p := snap.Ports[0]; p.Driver != tc.wantDriver || p.Mode != tc.wantMode {
				t.Errorf("port va: driver %q, mode %q, want %q, %q", p.Driver, p.Mode, tc.wantDriver, tc.wantMode)
			}
			// The router answers through the port: ARP, then ICMP echo.
			ns.IP(t, "addr", "add", "192.168.77.2/24", "dev", "vb")
			if out, err := exec.Command("ip", "netns", "exec", ns.Name(), "ping", "-c", "3", "-i", "0.2", "-W", "2", "192.168.77.1").CombinedOutput(); err != nil {
				t.Errorf("ping the router over %s: %v\n%s", tc.wantDriver, err, out)
			}
			if st := r.Snapshot().Ports[0]; st.RxPackets == 0 || st.TxPackets == 0 {
				t.Errorf("port va after ping: rx %d, tx %d frames, want both > 0", st.RxPackets, st.TxPackets)
			}
		})
	}
}
