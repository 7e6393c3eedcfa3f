package lab

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"gopkg.in/yaml.v3"
)

// fakeRouter is the helper role "fakerouter": a stand-in for `gvrouter run`
// that lets the kernel do the forwarding. It reads the lab config, puts the
// interface addresses on the ports, sets ip_forward=1 and serves a status
// page with the ports' kernel counters, on SIGTERM it undoes all that. Run
// must see traffic cross it and still fail the kernel-silence proofs.
func fakeRouter(args []string) error {
	if len(args) == 0 || args[0] != "run" {
		return fmt.Errorf("fake router: want run, got %q", args)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "")
	fs.String("run-dir", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	b, err := os.ReadFile(*cfgPath)
	if err != nil {
		return err
	}
	var cfg labConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return err
	}
	ctx := context.Background()
	dhcpIface := ""
	for _, i := range cfg.Interfaces {
		if err := run(ctx, "sysctl", "-qw", "net.ipv6.conf."+i.Port+".disable_ipv6=0"); err != nil {
			return err
		}
		for _, a := range i.Addresses {
			if a == "dhcp" {
				// The fake stands in for the lease the ISP gives the
				// real router: its address and option 121 routes.
				a, dhcpIface = wanRouter4.String(), i.Name
			}
			if err := run(ctx, "ip", "addr", "add", a, "dev", i.Port, "nodad"); err != nil {
				return err
			}
		}
		if dhcpIface == i.Name {
			if err := run(ctx, "ip", "route", "add", farNet.String(), "via", wanHost4.Addr().String()); err != nil {
				return err
			}
		}
	}
	if err := run(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
		return err
	}
	defer func() {
		run(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
		for _, i := range cfg.Interfaces {
			run(ctx, "ip", "addr", "flush", "dev", i.Port)
			run(ctx, "sysctl", "-qw", "net.ipv6.conf."+i.Port+".disable_ipv6=1")
		}
	}()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ifs []string
		for _, i := range cfg.Interfaces {
			rx, _ := os.ReadFile(filepath.Join("/sys/class/net", i.Port, "statistics/rx_packets"))
			// The addresses it put on the port, the lease's among
			// them: the lab waits for the lease's address on the
			// interface (leaseApplied).
			var addrs []string
			for _, a := range i.Addresses {
				if a == "dhcp" {
					a = wanRouter4.String()
				}
				addrs = append(addrs, strconv.Quote(a))
			}
			ifs = append(ifs, fmt.Sprintf(`{"name":%q,"rx_packets":%s,"addresses":[%s]}`, i.Name, bytes.TrimSpace(rx), strings.Join(addrs, ",")))
		}
		clients := ""
		if dhcpIface != "" {
			clients = fmt.Sprintf(`,"dhcp_clients":[{"interface":%q,"state":"bound","address":%q}]`, dhcpIface, wanRouter4)
		}
		fmt.Fprintf(w, `{"interfaces":[%s]%s}`, strings.Join(ifs, ","), clients)
	})
	for _, l := range cfg.Status.Listen {
		if strings.HasPrefix(l, "lan:") {
			l = lanRouter4.Addr().String() + l[3:]
		}
		ln, err := net.Listen("tcp", l)
		if err != nil {
			return err
		}
		go http.Serve(ln, h)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	return nil
}

// TestRunFakeRouter runs Run against the kernel posing as the router: the
// plain traffic proofs pass, the NAT proofs (the kernel forwards without
// NAT here) and the proofs that the kernel stayed out fail, and Run still
// tears everything down.
func TestRunFakeRouter(t *testing.T) {
	parallelLongLab(t)
	requirePrivileged(t)
	wrapper := filepath.Join(t.TempDir(), "router")
	script := fmt.Sprintf("#!/bin/sh\n%s=fakerouter exec %q -test.run='^$' \"$@\"\n", helperEnv, os.Args[0])
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var routerPID int
	tag := nextRunTag()
	err := Run(context.Background(), Options{
		RouterBinary: wrapper,
		Log:          testLogger(t),
		Stdout:       &out,
		runTag:       tag,
		testHook: func(l *lab) error {
			routerPID = l.router.cmd.Process.Pid
			return nil
		},
	})
	t.Logf("output:\n%s", out.String())
	if err == nil {
		t.Fatalf("Run() with the kernel forwarding = nil error, want the kernel proofs to fail")
	}
	for _, want := range []string{
		"ok   ping LAN→WAN IPv4", "ok   ping WAN→LAN IPv6",
		"ok   TCP LAN→WAN IPv6", "ok   TCP WAN→LAN IPv6",
		// The kernel forwards without NAT: the NAT proofs fail.
		"FAIL masquerade: TCP LAN→WAN", "FAIL port forward", "FAIL fast path",
		"ok   status page from LAN host", "ok   status page from this machine",
		"ok   router counters rose",
		// Nothing serves DHCP: the ISP's dnsmasq never ACKed the fake,
		// and nothing answers the LAN host's udhcpc.
		"FAIL WAN address by DHCP", "FAIL LAN host address by DHCP", "FAIL LAN host resolves",
		// Nor does anything serve IPv6: no DHCPv6, no RAs, no delegation,
		// no RAs learned.
		"FAIL LAN host DNS by stateless DHCPv6", "FAIL LAN host's lease name resolves", "FAIL LAN host autoconfigures by SLAAC",
		"FAIL IPv6 prefix delegated by the ISP", "FAIL IPv6 default route learned",
		"FAIL kernel in router namespace forwarded nothing",
		"FAIL no kernel addresses on lan0, wan0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.Contains(err.Error(), "15 of 25 proofs failed") {
		t.Errorf("Run() error = %v, want 15 of 25 proofs failed", err)
	}
	if ns := runNamespaces(t, runPrefix(os.Getpid())+tag); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
	if routerPID == 0 {
		t.Errorf("test hook did not run")
	} else if !gone(routerPID) {
		t.Errorf("fake router %d still runs after Run", routerPID)
	}
}
