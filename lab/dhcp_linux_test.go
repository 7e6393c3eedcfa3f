package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// udhcpcScript records every event busybox udhcpc reports and configures
// the leased address (udhcpc renews from it with a kernel socket), never
// the default route or resolv.conf: the namespace shares the machine's
// files.
const udhcpcScript = `#!/bin/sh
echo "$1 ip=$ip mask=$mask router=$router dns=$dns domain=$domain lease=$lease" >> %s
case "$1" in
bound|renew) ip addr replace "$ip/$mask" dev "$interface" ;;
deconfig) ip -4 addr flush dev "$interface" label "$interface" scope global dynamic 2>/dev/null ;;
esac
exit 0
`

// TestLabDHCPServerUdhcpc runs busybox udhcpc on the lab's LAN host
// against the router's DHCP server (netstack, raw-frame tap): it gets an
// address from the range with the router as gateway and DNS, renews at T1
// (the lab's lease is 20 s), shows up in the status page's lease table
// with the hostname it sent, and its release frees the lease.
func TestLabDHCPServerUdhcpc(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "udhcpc")
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		u, err := l.startUdhcpc(ctx, "udhcpc", "labhost")
		if err != nil {
			return err
		}
		defer u.stop()
		cmd, logPath := u.cmd, u.events
		bound, err := waitEvent(ctx, logPath, "bound", 20*time.Second)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(bound["ip"])
		if err != nil {
			return fmt.Errorf("bound without an address: %v", bound)
		}
		if first, last := netip.MustParseAddr("10.77.1.100"), netip.MustParseAddr("10.77.1.199"); ip.Less(first) || last.Less(ip) {
			return fmt.Errorf("udhcpc got %s, outside the range %s", ip, lanDHCPRange)
		}
		// The server hands out the router's own address as DNS (its
		// forwarder, which runs whenever it is handed out).
		if bound["router"] != lanRouter4.Addr().String() || bound["dns"] != lanRouter4.Addr().String() || bound["mask"] != "24" || bound["lease"] != "20" {
			return fmt.Errorf("bound = %v, want router and dns %s (the forwarder), mask 24, lease 20", bound, lanRouter4.Addr())
		}
		t.Logf("udhcpc bound: %v", bound)
		if _, err := waitEvent(ctx, logPath, "renew", 25*time.Second); err != nil {
			return fmt.Errorf("no renewal at T1 (10 s): %w", err)
		}
		lease, err := l.waitLease(ctx, ip, func(ls status.DHCPLease) bool { return ls.State == "" || ls.State == "bound" })
		if err != nil {
			return err
		}
		if lease.Hostname != "labhost" || lease.Static {
			return fmt.Errorf("status lease = %+v, want hostname labhost, dynamic", lease)
		}
		// SIGUSR2: release the lease (RFC 2131 §4.4.6).
		if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return err
		}
		if _, err := l.waitLease(ctx, ip, func(ls status.DHCPLease) bool { return ls.State == "released" }); err != nil {
			return fmt.Errorf("after DHCPRELEASE: %w", err)
		}
		return nil
	})
}

// waitLease polls the status page until the LAN DHCP server's lease of
// addr satisfies ok.
func (l *lab) waitLease(ctx context.Context, addr netip.Addr, ok func(status.DHCPLease) bool) (status.DHCPLease, error) {
	var last status.Snapshot
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		s, err := l.statusSince(ctx, time.Now())
		if err != nil {
			return status.DHCPLease{}, err
		}
		last = s
		for _, srv := range s.DHCPServers {
			for _, ls := range srv.Leases {
				if ls.Addr == addr && ok(ls) {
					return ls, nil
				}
			}
		}
	}
	return status.DHCPLease{}, fmt.Errorf("status page: no matching lease of %s; dhcp_servers: %+v", addr, last.DHCPServers)
}

// udhcpcRun is busybox udhcpc running on the LAN host in the foreground,
// recording its events with udhcpcScript.
type udhcpcRun struct {
	cmd    *exec.Cmd
	events string // the event log waitEvent reads
}

// startUdhcpc starts udhcpc on the LAN host sending hostname (option
// 12); name names its files in the lab directory.
func (l *lab) startUdhcpc(ctx context.Context, name, hostname string) (*udhcpcRun, error) {
	u := &udhcpcRun{events: filepath.Join(l.dir, name+".events")}
	script := filepath.Join(l.dir, name+".sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(udhcpcScript, u.events)), 0o700); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(l.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child holds its own descriptor
	u.cmd = command(ctx, l.lanNS, "udhcpc", "-f", "-i", hostIf, "-s", script, "-x", "hostname:"+hostname, "-t", "10", "-T", "1")
	u.cmd.Stdout, u.cmd.Stderr = out, out
	if err := u.cmd.Start(); err != nil {
		return nil, err
	}
	return u, nil
}

// stop kills udhcpc (by its PID) and waits for it.
func (u *udhcpcRun) stop() {
	u.cmd.Process.Signal(syscall.SIGKILL)
	u.cmd.Wait()
}
