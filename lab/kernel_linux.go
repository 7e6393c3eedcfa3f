package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// kernelState is what the router namespace's kernel says about forwarding.
type kernelState struct {
	// ForwDatagrams is Ip: ForwDatagrams from /proc/net/snmp (RFC 4293
	// ipSystemStatsOutForwDatagrams): IPv4 packets the kernel forwarded.
	ForwDatagrams uint64
	// Forw6Datagrams is Ip6OutForwDatagrams from /proc/net/snmp6.
	Forw6Datagrams uint64
	// IPForward is net.ipv4.ip_forward ("0" or "1").
	IPForward string
	// IP6Forward is net.ipv6.conf.all.forwarding.
	IP6Forward string
}

// readKernelState reads the forwarding counters and switches of namespace ns.
func readKernelState(ns string) (kernelState, error) {
	var k kernelState
	err := inNetns(ns, func() error {
		snmp, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		if k.ForwDatagrams, err = snmpValue(snmp, "Ip", "ForwDatagrams"); err != nil {
			return err
		}
		snmp6, err := os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		if k.Forw6Datagrams, err = snmp6Value(snmp6, "Ip6OutForwDatagrams"); err != nil {
			return err
		}
		if k.IPForward, err = readSysctl("net/ipv4/ip_forward"); err != nil {
			return err
		}
		k.IP6Forward, err = readSysctl("net/ipv6/conf/all/forwarding")
		return err
	})
	if err != nil {
		return k, fmt.Errorf("lab: kernel state of %s: %w", ns, err)
	}
	return k, nil
}

func readSysctl(path string) (string, error) {
	b, err := os.ReadFile("/proc/sys/" + path)
	return strings.TrimSpace(string(b)), err
}

// snmpValue returns one counter from /proc/net/snmp, whose sections are a
// header line ("Ip: Forwarding DefaultTTL ...") then a value line.
func snmpValue(snmp []byte, section, name string) (uint64, error) {
	var header []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != section+":" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, h := range header {
			if h == name && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("snmp: no %s %s", section, name)
}

// snmp6Value returns one counter from /proc/net/snmp6 ("Name value" lines).
func snmp6Value(snmp6 []byte, name string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(snmp6))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			return strconv.ParseUint(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("snmp6: no %s", name)
}

// ifAddrs returns the addresses the kernel has on interface dev in
// namespace ns ("10.77.1.1/24"), link-local IPv6 addresses included.
func ifAddrs(ctx context.Context, ns, dev string) ([]string, error) {
	out, err := output(ctx, ns, "ip", "-j", "addr", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("lab: ip -j addr show dev %s: %w", dev, err)
	}
	var addrs []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		}
	}
	return addrs, nil
}

// ctStatSum returns the sum over CPUs of one column of
// /proc/net/stat/nf_conntrack: a header line of names, then one line of
// hexadecimal values per CPU.
func ctStatSum(stat []byte, name string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	if !sc.Scan() {
		return 0, fmt.Errorf("nf_conntrack stat: empty")
	}
	col := slices.Index(strings.Fields(sc.Text()), name)
	if col < 0 {
		return 0, fmt.Errorf("nf_conntrack stat: no %s", name)
	}
	var sum uint64
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if col >= len(f) {
			return 0, fmt.Errorf("nf_conntrack stat: short line %q", sc.Text())
		}
		v, err := strconv.ParseUint(f[col], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("nf_conntrack stat: %s: %w", name, err)
		}
		sum += v
	}
	return sum, nil
}
