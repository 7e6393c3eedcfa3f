package portmaptest

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// Namespaces builds the test topology in three network namespaces named
// after prefix: a gateway with veth "gl" at LANAddr/24 towards a LAN
// namespace (HostA on "lg", its default route via the gateway), and
// veth "gw0" at wan/24 towards a WAN namespace (".9" of that /24 on
// "wg", its default route via wan). IPv6 is off in all three, so only
// the IPv4 protocols under test speak.
func Namespaces(tb testing.TB, prefix string, wan netip.Addr) (gw, lan, wanNS *netnstest.Netns) {
	tb.Helper()
	gw = netnstest.New(tb, prefix+"gw", netnstest.WithoutIPv6())
	lan = netnstest.New(tb, prefix+"lan", netnstest.WithoutIPv6())
	wanNS = netnstest.New(tb, prefix+"wan", netnstest.WithoutIPv6())
	wanHost := wan.As4()
	wanHost[3] = 9
	gw.IP(tb, "link", "add", "gl", "type", "veth", "peer", "name", "lg", "netns", lan.Name())
	gw.IP(tb, "link", "add", "gw0", "type", "veth", "peer", "name", "wg", "netns", wanNS.Name())
	gw.IP(tb, "addr", "add", LANAddr.String()+"/24", "dev", "gl")
	gw.IP(tb, "addr", "add", wan.String()+"/24", "dev", "gw0")
	gw.IP(tb, "link", "set", "gl", "up")
	gw.IP(tb, "link", "set", "gw0", "up")
	lan.IP(tb, "addr", "add", HostA.String()+"/24", "dev", "lg")
	lan.IP(tb, "link", "set", "lg", "up")
	lan.IP(tb, "route", "add", "default", "via", LANAddr.String())
	wanNS.IP(tb, "addr", "add", netip.AddrFrom4(wanHost).String()+"/24", "dev", "wg")
	wanNS.IP(tb, "link", "set", "wg", "up")
	wanNS.IP(tb, "route", "add", "default", "via", wan.String())
	return gw, lan, wanNS
}
