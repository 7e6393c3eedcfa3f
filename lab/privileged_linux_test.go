package lab

import (
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// requirePrivileged skips the test when it cannot run: not root, or a tool
// missing. Under CI=true (CI runs as root with the tools installed) that is
// a failure instead, so a green CI means the lab tests ran.
func requirePrivileged(t *testing.T, tools ...string) {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); netnstest.SkipOrFail(t, format, args...) }
	if os.Geteuid() != 0 {
		fail("lab tests need root (network namespaces)")
	}
	// Every NAT lab runs the ISP's dnsmasq, kea-dhcp6 and radvd and proves a LAN
	// lease with busybox udhcpc and stateless DHCPv6 with ISC dhclient
	// (isp_linux.go, isp6_linux.go, services_linux.go).
	for _, tool := range append([]string{"ip", "dnsmasq", "kea-dhcp6", "radvd", "udhcpc", "dhclient"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			fail("lab tests need %s: %v", tool, err)
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
