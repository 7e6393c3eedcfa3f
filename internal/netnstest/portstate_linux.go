package netnstest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// PortState is what a router's port takeover changes in the kernel,
// apart from offloads (which the caller reads with hw.GetOffloads), in a
// form to compare before and after: every address as iproute2 shows it
// without the transient flags (tentative, while DAD runs) and with
// lifetimes as "forever" or "finite", the disable_ipv6 sysctl, the
// namespace's nftables tables and the interface's tc qdiscs and ingress
// filters.
type PortState struct {
	DisableIPv6 string
	Addrs       []string
	NFTables    string
	TCQdiscs    string
	TCIngress   string
}

// String formats s over several lines.
func (s PortState) String() string {
	return fmt.Sprintf("disable_ipv6=%s\naddrs:\n  %s\nnft tables:\n%s\ntc qdiscs:\n%s\ntc ingress filters:\n%s",
		s.DisableIPv6, strings.Join(s.Addrs, "\n  "), s.NFTables, s.TCQdiscs, s.TCIngress)
}

// Equal reports whether s and o are the same state.
func (s PortState) Equal(o PortState) bool {
	return s.DisableIPv6 == o.DisableIPv6 && slices.Equal(s.Addrs, o.Addrs) && s.NFTables == o.NFTables &&
		s.TCQdiscs == o.TCQdiscs && s.TCIngress == o.TCIngress
}

// PortStateOf reads ifname's PortState in n.
func (n *Netns) PortStateOf(tb testing.TB, ifname string) PortState {
	tb.Helper()
	var s PortState
	s.DisableIPv6 = n.Sysctl(tb, "/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6")
	out, err := exec.Command("ip", "-n", n.name, "-j", "addr", "show", "dev", ifname).Output()
	if err != nil {
		tb.Fatalf("ip -j addr show dev %s: %v", ifname, err)
	}
	var links []struct {
		AddrInfo []map[string]any `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		tb.Fatalf("ip -j addr show dev %s: %v: %s", ifname, err, out)
	}
	for _, a := range links[0].AddrInfo {
		var f []string
		for k, v := range a {
			switch k {
			case "family", "local", "prefixlen", "scope", "label", "broadcast", "address", "protocol":
				f = append(f, fmt.Sprintf("%s=%v", k, v))
			case "valid_life_time", "preferred_life_time":
				life := "finite"
				if v.(float64) == 4294967295 {
					life = "forever"
				}
				f = append(f, k+"="+life)
			case "tentative", "optimistic":
			default:
				f = append(f, fmt.Sprintf("%s=%v", k, v))
			}
		}
		slices.Sort(f)
		s.Addrs = append(s.Addrs, strings.Join(f, " "))
	}
	slices.Sort(s.Addrs)
	s.NFTables = n.Run(tb, "nft", "list", "tables")
	s.TCQdiscs = n.Run(tb, "tc", "qdisc", "show", "dev", ifname)
	s.TCIngress = n.Run(tb, "tc", "filter", "show", "dev", ifname, "ingress")
	return s
}
