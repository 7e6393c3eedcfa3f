package wireguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// StaleHandshake is how old a peer's last handshake may get before its
// endpoint's host name is looked up again: wireguard-tools'
// contrib/reresolve-dns uses 135 s, a rekey interval (120 s) plus the
// handshake's retry time, so a live session, which rekeys every two
// minutes, is never touched.
const StaleHandshake = 135 * time.Second

// Resolver looks up a host name's addresses, e.g. the router's DNS
// forwarder client; net.DefaultResolver.LookupNetIP fits.
type Resolver func(host string) ([]netip.Addr, error)

// Reresolve returns the UAPI text (for the device's IpcSet) that moves
// each peer whose handshake is stale or never happened to the current
// address of its configured endpoint host, as the endpoint re-resolution
// users rely on for dynamic DNS (systemd#9911, reresolve-dns). endpoints
// maps a peer's public key to its configured "host:port"; literal
// addresses and peers with a fresh handshake are left alone, and so is
// an endpoint the device already has (the peer roamed there itself).
// The errors of failed lookups are joined; the other peers still move.
func Reresolve(st Status, endpoints map[Key]string, resolve Resolver) (string, error) {
	var b strings.Builder
	var errs []error
	for _, p := range st.Peers {
		if p.HandshakeAge >= 0 && p.HandshakeAge < StaleHandshake.Seconds() {
			continue
		}
		k, err := ParseKey(p.PublicKey)
		if err != nil {
			continue
		}
		ep, ok := endpoints[k]
		if !ok {
			continue
		}
		host, portText, err := net.SplitHostPort(ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %s: endpoint %q: %w", p.Name, ep, err))
			continue
		}
		if _, err := netip.ParseAddr(host); err == nil {
			continue // a literal: nothing to resolve
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %s: endpoint %q: bad port", p.Name, ep))
			continue
		}
		addrs, err := resolve(host)
		if err != nil || len(addrs) == 0 {
			if err == nil {
				err = errors.New("no address")
			}
			errs = append(errs, fmt.Errorf("peer %s: resolve %s: %w", p.Name, host, err))
			continue
		}
		ap := netip.AddrPortFrom(pickAddr(addrs), uint16(port))
		if ap.String() == p.Endpoint {
			continue
		}
		fmt.Fprintf(&b, "public_key=%s\nupdate_only=true\nendpoint=%s\n", k.hex(), ap)
	}
	return b.String(), errors.Join(errs...)
}

// pickAddr prefers IPv4, which every WAN has, as wg(8) does for a name
// with both families.
func pickAddr(addrs []netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap()
		}
	}
	return addrs[0]
}
