package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

const (
	// echoBytes is what each TCP proof sends and expects back: enough for
	// dozens of full-size segments each way, small enough to take
	// milliseconds.
	echoBytes = 256 << 10
	// proofTimeout bounds each proof.
	proofTimeout = 15 * time.Second
	// statusSampleWait is a little over the status server's sampling
	// period (router/status: once a second).
	statusSampleWait = 1200 * time.Millisecond
	// statusFreshTimeout bounds the wait for a snapshot newer than the
	// traffic.
	statusFreshTimeout = 5 * time.Second
)

// proof is the outcome of one check.
type proof struct {
	Name   string
	Err    error
	Detail string
}

// prove runs every check against the running router and returns their
// outcomes; it fails only if it could not run them.
func (l *lab) prove(ctx context.Context) []proof {
	var ps []proof
	add := func(name string, detail string, err error) {
		ps = append(ps, proof{Name: name, Err: err, Detail: detail})
		if err != nil {
			l.log.Warn("lab: proof failed", "proof", name, "err", err)
		} else {
			l.log.Debug("lab: proof passed", "proof", name, "detail", detail)
		}
	}
	kBefore, kErr := readKernelState(l.rtrNS)
	before, sErr := l.routerCounters(ctx)

	if l.natLab() {
		l.natLabProofs(ctx, add)
		l.serviceProofs(ctx, add)
	} else {
		l.routedProofs(ctx, add)
	}

	url := "http://" + lanRouter4.Addr().String() + "/api/status"
	body, err := httpGet(ctx, l.lanNS, url)
	if err == nil {
		_, err = parseStatus(body)
	}
	add("status page from LAN host "+url, fmt.Sprintf("%d bytes", len(body)), err)

	if l.proxy != nil {
		url := fmt.Sprintf("http://%s/api/status", l.proxy.Addr())
		body, err := httpGet(ctx, "", url)
		if err == nil {
			_, err = parseStatus(body)
		}
		add("status page from this machine "+url, fmt.Sprintf("%d bytes", len(body)), err)
	}

	after, err := l.freshCounters(ctx, time.Now())
	if err == nil {
		err = sErr
	}
	var detail []string
	if err == nil {
		lan, wan := routerInterfaces(l.opt.Topology)
		for _, name := range []string{lan, wan} {
			b, a := before[name], after[name]
			detail = append(detail, fmt.Sprintf("%s rx_packets %d→%d", name, b.RxPackets, a.RxPackets))
			if a.RxPackets <= b.RxPackets {
				err = fmt.Errorf("interface %s rx_packets did not rise: %d → %d", name, b.RxPackets, a.RxPackets)
			}
		}
	}
	add("router counters rose", strings.Join(detail, ", "), err)

	kAfter, err := readKernelState(l.rtrNS)
	if err == nil {
		err = kErr
	}
	if err == nil {
		err = kernelSilent(kBefore, kAfter)
	}
	add("kernel in router namespace forwarded nothing",
		fmt.Sprintf("ForwDatagrams %d→%d, Ip6OutForwDatagrams %d→%d, ip_forward=%s",
			kBefore.ForwDatagrams, kAfter.ForwDatagrams, kBefore.Forw6Datagrams, kAfter.Forw6Datagrams, kAfter.IPForward), err)

	var addrs []string
	err = nil
	ports := routerPorts(l.opt.Topology)
	for _, dev := range ports {
		a, e := ifAddrs(ctx, l.rtrNS, dev)
		if e != nil {
			err = e
			break
		}
		addrs = append(addrs, a...)
	}
	if err == nil && len(addrs) > 0 {
		err = fmt.Errorf("kernel addresses on router ports: %v", addrs)
	}
	add("no kernel addresses on "+strings.Join(ports, ", "), "", err)
	return ps
}

// natLab reports whether the lab's router is the NAT appliance (the
// one-router topologies); the MACsec lab joins two routed sites.
func (l *lab) natLab() bool { return l.opt.Topology != TopologyMACsec }

// natLabProofs are the reachability proofs of the NAT lab, then its NAT
// proofs.
func (l *lab) natLabProofs(ctx context.Context, add func(name, detail string, err error)) {
	for _, p := range []struct {
		name string
		ns   string
		to   netip.Addr
	}{
		{"ping LAN→WAN IPv4 (through masquerade)", l.lanNS, wanHost4.Addr()},
		{"ping WAN→router WAN address IPv4", l.wanNS, wanRouter4.Addr()},
		{"ping LAN→WAN IPv6", l.lanNS, wanHost6.Addr()},
		{"ping WAN→LAN IPv6", l.wanNS, lanHost6.Addr()},
	} {
		d, err := ping(ctx, p.ns, p.to)
		add(p.name, d, err)
	}
	// IPv4 WAN→LAN goes through the port forward (natProofs); IPv6 is
	// not translated, and the firewall admits new inbound flows only to
	// the allowed port.
	for _, p := range []struct {
		name            string
		clientNS, srvNS string
		srv             netip.AddrPort
	}{
		{"TCP LAN→WAN IPv6", l.lanNS, l.wanNS, netip.AddrPortFrom(wanHost6.Addr(), 0)},
		{fmt.Sprintf("TCP WAN→LAN IPv6 (firewall allows port %d)", forwardPort), l.wanNS, l.lanNS, netip.AddrPortFrom(lanHost6.Addr(), forwardPort)},
	} {
		_, d, err := echoPeer(ctx, p.clientNS, p.srvNS, p.srv, netip.AddrPort{})
		add(p.name, d, err)
	}
	l.natProofs(ctx, add)
}

// routedProofs are the reachability proofs of a lab without NAT: ping and
// TCP both ways in both families.
func (l *lab) routedProofs(ctx context.Context, add func(name, detail string, err error)) {
	for _, p := range []struct {
		name string
		ns   string
		to   netip.Addr
	}{
		{"ping LAN→WAN IPv4", l.lanNS, wanHost4.Addr()},
		{"ping WAN→LAN IPv4", l.wanNS, lanHost4.Addr()},
		{"ping LAN→WAN IPv6", l.lanNS, wanHost6.Addr()},
		{"ping WAN→LAN IPv6", l.wanNS, lanHost6.Addr()},
	} {
		d, err := ping(ctx, p.ns, p.to)
		add(p.name, d, err)
	}
	for _, p := range []struct {
		name            string
		clientNS, srvNS string
		srv             netip.Addr
	}{
		{"TCP LAN→WAN IPv4", l.lanNS, l.wanNS, wanHost4.Addr()},
		{"TCP WAN→LAN IPv4", l.wanNS, l.lanNS, lanHost4.Addr()},
		{"TCP LAN→WAN IPv6", l.lanNS, l.wanNS, wanHost6.Addr()},
		{"TCP WAN→LAN IPv6", l.wanNS, l.lanNS, lanHost6.Addr()},
	} {
		d, err := tcpEcho(ctx, p.clientNS, p.srvNS, p.srv)
		add(p.name, d, err)
	}
	// Routed flows are tracked too (conntrack without NAT) and take the
	// fast path; in the MACsec lab its egress is the SecY.
	d, err := l.fastPathProof(ctx)
	add("fast path: an assured flow's packets skip netstack", d, err)
}

// kernelSilent checks that the kernel forwarded nothing between two
// readings and that its forwarding switches are off; it names every problem.
func kernelSilent(before, after kernelState) error {
	var errs []error
	if before.IPForward != "0" || after.IPForward != "0" {
		errs = append(errs, fmt.Errorf("net.ipv4.ip_forward = %s, want 0", after.IPForward))
	}
	if before.IP6Forward != "0" || after.IP6Forward != "0" {
		errs = append(errs, fmt.Errorf("net.ipv6.conf.all.forwarding = %s, want 0", after.IP6Forward))
	}
	if after.ForwDatagrams != before.ForwDatagrams {
		errs = append(errs, fmt.Errorf("kernel forwarded %d IPv4 packets", after.ForwDatagrams-before.ForwDatagrams))
	}
	if after.Forw6Datagrams != before.Forw6Datagrams {
		errs = append(errs, fmt.Errorf("kernel forwarded %d IPv6 packets", after.Forw6Datagrams-before.Forw6Datagrams))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.ReplaceAll(errors.Join(errs...).Error(), "\n", "; "))
}

// freshCounters reads the router's counters from a snapshot taken after
// since: the status server samples once a second. Without a "time" field
// in the snapshot it waits statusSampleWait instead.
func (l *lab) freshCounters(ctx context.Context, since time.Time) (map[string]ifCounters, error) {
	deadline := since.Add(statusFreshTimeout)
	for {
		body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
		if err != nil {
			return nil, err
		}
		c, at, err := parseStatusTime(body)
		if err != nil {
			return nil, err
		}
		fresh := !at.IsZero() && !at.Before(since) || at.IsZero() && time.Since(since) >= statusSampleWait
		if fresh || time.Now().After(deadline) {
			return c, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// routerCounters reads the router's interface counters through its status
// listener on 127.0.0.1 inside the router namespace.
func (l *lab) routerCounters(ctx context.Context) (map[string]ifCounters, error) {
	body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
	if err != nil {
		return nil, err
	}
	return parseStatus(body)
}

// tcpEcho runs an echo server in srvNS on srv and a client in clientNS
// that sends echoBytes of random data and checks it comes back intact.
func tcpEcho(ctx context.Context, clientNS, srvNS string, srv netip.Addr) (string, error) {
	_, d, err := echoPeer(ctx, clientNS, srvNS, netip.AddrPortFrom(srv, 0), netip.AddrPort{})
	return d, err
}

// httpGet fetches url with a socket made in namespace ns ("" is the
// caller's own) and returns the body of a 200 answer.
func httpGet(ctx context.Context, ns, url string) ([]byte, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if ns != "" {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialIn(ctx, ns, addr, proofTimeout)
		}
	}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: proofTimeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}
