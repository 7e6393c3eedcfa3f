package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/wireguard"
)

// defaultClientKeepalive is the new peer's PersistentKeepalive: a phone
// sits behind a carrier NAT whose UDP mappings may last only 30 s;
// wg-quick's documentation suggests 25 s for that.
const defaultClientKeepalive = 25 * time.Second

// cmdWGPeer runs `gvrouter wg peer NAME`: a key pair and a tunnel
// address for a new peer of a wireguard: interface, printed as a
// complete wg-quick(8) file for the peer (the router's public key and
// endpoint, DNS = the router's tunnel address), the same as a QR code
// in the terminal for the phone apps' "scan from QR code", and the
// peers: entry to add to the router's config before `gvrouter reload`.
// The private key is printed here only; the router never stores it.
func cmdWGPeer(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wg peer", flag.ContinueOnError)
	fs.SetOutput(out)
	path := fs.String("config", "/etc/gvrouter/config.yaml", "the router's config file")
	iface := fs.String("interface", "", "the wireguard: interface (default: the only one)")
	endpoint := fs.String("endpoint", "", "host:port the peer dials, e.g. vpn.example.net:51820 (default: the first wan IPv4 address and the listen port)")
	all := fs.Bool("all", false, "send all the peer's traffic through the tunnel (AllowedIPs 0.0.0.0/0, ::/0) instead of the router's lan and tunnel subnets")
	keepalive := fs.Duration("keepalive", defaultClientKeepalive, "the peer's PersistentKeepalive (0: off)")
	qr := fs.Bool("qr", true, "print the config as a QR code too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: gvrouter wg peer [-config FILE] [-interface wg0] [-endpoint host:port] [-all] NAME")
	}
	name := fs.Arg(0)
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	cc, ic, err := cfg.NewWireGuardPeer(*iface, name, *endpoint, *all)
	if err != nil {
		return err
	}
	cc.PersistentKeepalive = keepalive.Truncate(time.Second)
	text := cc.WGQuick()
	fmt.Fprintf(out, "# wg-quick config of WireGuard peer %q of %s (%s.conf):\n%s", name, ic.Name, name, text)
	if *qr {
		q, err := qrcode.New(text, qrcode.Medium)
		if err != nil {
			return fmt.Errorf("qr code: %w", err)
		}
		fmt.Fprintf(out, "\n# The same as a QR code (WireGuard app: add tunnel, scan from QR code):\n%s", q.ToSmallString(false))
	}
	fmt.Fprintf(out, "\n# Add to interface %q's wireguard: peers: in %s, then run gvrouter reload:\n%s", ic.Name, *path, peerYAML(name, cc))
	clear(cc.PrivateKey[:])
	return nil
}

// peerYAML is the router's peers: entry for cc.
func peerYAML(name string, cc wireguard.ClientConfig) string {
	ips := make([]string, len(cc.Addresses))
	for i, a := range cc.Addresses {
		ips[i] = a.String()
	}
	return fmt.Sprintf("        - {name: %s, public_key: %s, allowed_ips: [%s]}\n", name, cc.PrivateKey.PublicKey(), strings.Join(ips, ", "))
}
