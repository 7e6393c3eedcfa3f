// Command dnsforwardbench runs package dnsforward on kernel sockets, for
// scripts/dnsbench.sh to measure against dnsmasq in the same place: it
// serves UDP and TCP on -listen, forwards to -upstream, and prints the
// forwarder's Status as JSON on stdout when it gets SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/gvrouter/gvrouter/services/dnsforward"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:5353", "UDP and TCP address to serve")
	upstream := flag.String("upstream", "127.0.0.1:53", "upstream resolver address:port")
	domain := flag.String("domain", "lan", "local domain")
	entries := flag.Int("cache", dnsforward.DefaultMaxEntries, "cache entries")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*listen, *upstream, *domain, *entries); err != nil {
		log.Print(err)
	}
}

func run(listen, upstream, domain string, entries int) error {
	up, err := netip.ParseAddrPort(upstream)
	if err != nil {
		return fmt.Errorf("-upstream: %w", err)
	}
	f, err := dnsforward.New(dnsforward.Config{
		Upstreams:  []netip.AddrPort{up},
		Domain:     domain,
		MaxEntries: entries,
		DialUDP: func(ctx context.Context, server netip.AddrPort, port uint16) (net.Conn, error) {
			return net.DialUDP("udp", &net.UDPAddr{Port: int(port)}, net.UDPAddrFromAddrPort(server))
		},
		DialTCP: func(ctx context.Context, server netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", server.String())
		},
	})
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", listen)
	if err != nil {
		return err
	}
	defer pc.Close()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(3)
	for _, serve := range []func() error{
		func() error { return f.Serve(ctx, pc) },
		func() error { return f.ServeTCP(ctx, l) },
		func() error { return f.Run(ctx) },
	} {
		go func() {
			defer wg.Done()
			err := serve()
			cancel() // one stopped: stop all
			errc <- err
		}()
	}
	fmt.Fprintf(os.Stderr, "dnsforwardbench: serving %s, upstream %s\n", listen, up)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(f.Status())
}
