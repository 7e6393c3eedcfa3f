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
	"sync"
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

// step is one proof to run: its name in the summary, the chain it runs
// in, and the check.
type step struct {
	name string
	// chain names the steps that must run one after another, in their
	// order (they share a socket address, a DHCP client identity or one
	// another's state); chains run side by side. "" runs alone, after
	// all chains, in order: for a proof that counts the router's packets
	// and must see only its own.
	chain string
	run   func(ctx context.Context) (string, error)
}

// runSteps runs steps, each chain in its own goroutine, then the lone
// steps one at a time, and returns their outcomes in the order of steps
// and the time the chains were done. The proofs mostly wait (on DHCP
// clients, RAs, the status sampler), so running them side by side saves a
// lab start seconds.
func (l *lab) runSteps(ctx context.Context, steps []step) ([]proof, time.Time) {
	ps := make([]proof, len(steps))
	do := func(i int) {
		d, err := steps[i].run(ctx)
		ps[i] = proof{Name: steps[i].name, Err: err, Detail: d}
		if err != nil {
			l.log.Warn("lab: proof failed", "proof", steps[i].name, "err", err)
		} else {
			l.log.Debug("lab: proof passed", "proof", steps[i].name, "detail", d)
		}
	}
	chains := map[string][]int{}
	var order []string
	for i, s := range steps {
		if s.chain == "" {
			continue
		}
		if _, ok := chains[s.chain]; !ok {
			order = append(order, s.chain)
		}
		chains[s.chain] = append(chains[s.chain], i)
	}
	var wg sync.WaitGroup
	for _, c := range order {
		wg.Go(func() {
			for _, i := range chains[c] {
				do(i)
			}
		})
	}
	wg.Wait()
	chainsDone := time.Now()
	for i, s := range steps {
		if s.chain == "" {
			do(i)
		}
	}
	return ps, chainsDone
}

// prove runs every check against the running router and returns their
// outcomes; it fails only if it could not run them. With Options.fewProofs
// it runs only the reachability, status page and kernel checks.
func (l *lab) prove(ctx context.Context) []proof {
	kBefore, kErr := readKernelState(l.rtrNS)
	before, sErr := l.routerCounters(ctx)

	var steps []step
	if l.natLab() {
		steps = l.natLabProofs()
		if !l.opt.fewProofs {
			steps = append(steps, l.serviceProofs()...)
		}
	} else {
		steps = l.routedProofs()
	}
	steps = append(steps, l.statusPageProofs()...)
	ps, chainsDone := l.runSteps(ctx, steps)
	add := func(name string, detail string, err error) {
		ps = append(ps, proof{Name: name, Err: err, Detail: detail})
		if err != nil {
			l.log.Warn("lab: proof failed", "proof", name, "err", err)
		} else {
			l.log.Debug("lab: proof passed", "proof", name, "detail", detail)
		}
	}

	// A snapshot taken after the chains' traffic shows it; the lone
	// fast path proof has usually outlasted the sampling period by now.
	after, err := l.freshCounters(ctx, chainsDone)
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

// statusPageProofs fetch the status page through the router from the LAN
// host and, with the proxy, from this machine.
func (l *lab) statusPageProofs() []step {
	url := "http://" + lanRouter4.Addr().String() + "/api/status"
	steps := []step{{"status page from LAN host " + url, "status-lan", func(ctx context.Context) (string, error) {
		return statusPage(ctx, l.lanNS, url)
	}}}
	if l.proxy != nil {
		url := fmt.Sprintf("http://%s/api/status", l.proxy.Addr())
		steps = append(steps, step{"status page from this machine " + url, "status-proxy", func(ctx context.Context) (string, error) {
			return statusPage(ctx, "", url)
		}})
	}
	return steps
}

// statusPage fetches and parses the status JSON at url from namespace ns.
func statusPage(ctx context.Context, ns, url string) (string, error) {
	body, err := httpGet(ctx, ns, url)
	if err == nil {
		_, err = parseStatus(body)
	}
	return fmt.Sprintf("%d bytes", len(body)), err
}

// natLab reports whether the lab's router is the NAT appliance (the
// one-router topologies); the MACsec lab joins two routed sites.
func (l *lab) natLab() bool { return l.opt.Topology != TopologyMACsec }

// pingStep is the proof that host namespace ns pings to, in a chain of its
// own.
func pingStep(name, ns string, to netip.Addr) step {
	return step{name, "ping " + name, func(ctx context.Context) (string, error) { return ping(ctx, ns, to) }}
}

// natLabProofs are the reachability proofs of the NAT lab, then its NAT
// proofs (those only without Options.fewProofs).
func (l *lab) natLabProofs() []step {
	steps := []step{
		pingStep("ping LAN→WAN IPv4 (through masquerade)", l.lanNS, wanHost4.Addr()),
		pingStep("ping WAN→router WAN address IPv4", l.wanNS, wanRouter4.Addr()),
		pingStep("ping LAN→WAN IPv6", l.lanNS, wanHost6.Addr()),
		pingStep("ping WAN→LAN IPv6", l.wanNS, lanHost6.Addr()),
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
		steps = append(steps, step{p.name, p.name, func(ctx context.Context) (string, error) {
			_, d, err := echoPeer(ctx, p.clientNS, p.srvNS, p.srv, netip.AddrPort{})
			return d, err
		}})
	}
	if l.opt.fewProofs {
		return steps
	}
	return append(steps, l.natProofs()...)
}

// routedProofs are the reachability proofs of a lab without NAT: ping and
// TCP both ways in both families.
func (l *lab) routedProofs() []step {
	steps := []step{
		pingStep("ping LAN→WAN IPv4", l.lanNS, wanHost4.Addr()),
		pingStep("ping WAN→LAN IPv4", l.wanNS, lanHost4.Addr()),
		pingStep("ping LAN→WAN IPv6", l.lanNS, wanHost6.Addr()),
		pingStep("ping WAN→LAN IPv6", l.wanNS, lanHost6.Addr()),
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
		steps = append(steps, step{p.name, p.name, func(ctx context.Context) (string, error) {
			return tcpEcho(ctx, p.clientNS, p.srvNS, p.srv)
		}})
	}
	if l.opt.fewProofs {
		return steps
	}
	// Routed flows are tracked too (conntrack without NAT) and take the
	// fast path; in the MACsec lab its egress is the SecY. It counts
	// packets: it runs alone.
	return append(steps, step{"fast path: an assured flow's packets skip netstack", "", l.fastPathProof})
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
