package wireguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestReresolve: a peer configured at a host name whose address moved
// (the device still has the old one) gets no handshake; Reresolve looks
// the name up again and points the device at the new address, and the
// tunnel comes up. With a fresh handshake it changes nothing.
func TestReresolve(t *testing.T) {
	a, b := newNode(t, "10.9.0.1"), newNode(t, "10.9.0.2")
	b.configure(t, a.peerOf(false))
	old := b.peerOf(true)
	old.Endpoint = netip.MustParseAddrPort("127.0.0.1:9") // the name's old address: discard
	a.configure(t, old)
	endpoints := map[Key]string{b.key.PublicKey(): fmt.Sprintf("b.example.net:%d", b.port)}
	lookups := 0
	resolve := func(host string) ([]netip.Addr, error) {
		lookups++
		if host != "b.example.net" {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1")}, nil
	}
	status := func() Status {
		uapi, err := a.dev.IpcGet()
		if err != nil {
			t.Fatal(err)
		}
		st, err := ReadStatus(uapi, nil, Stats{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	up, err := Reresolve(status(), endpoints, resolve)
	if err != nil || lookups != 1 {
		t.Fatalf("Reresolve = %v after %d lookups", err, lookups)
	}
	if want := fmt.Sprintf("update_only=true\nendpoint=127.0.0.1:%d\n", b.port); !strings.Contains(up, want) {
		t.Fatalf("Reresolve = %q, want it to hold %q", up, want)
	}
	if n := b.bind.Stats.RxInitiations.Load(); n != 0 {
		t.Fatalf("b got %d initiations while a had the old address", n)
	}
	if err := a.dev.IpcSet(up); err != nil {
		t.Fatalf("IpcSet(%q): %v", up, err)
	}
	ping(t, a, b)
	if up, err := Reresolve(status(), endpoints, resolve); up != "" || err != nil || lookups != 1 {
		t.Errorf("after a handshake: Reresolve = %q, %v after %d lookups; want nothing done", up, err, lookups)
	}
}

// TestReresolveCases: literal endpoints are not looked up, failed
// lookups are reported by peer while the others still move, and an
// endpoint the device already has is left alone.
func TestReresolveCases(t *testing.T) {
	keys := make([]Key, 4)
	for i := range keys {
		k, _ := GenerateKey()
		keys[i] = k.PublicKey()
	}
	st := Status{Peers: []PeerStatus{
		{Name: "literal", PublicKey: keys[0].String(), HandshakeAge: -1},
		{Name: "broken", PublicKey: keys[1].String(), HandshakeAge: 400},
		{Name: "moved", PublicKey: keys[2].String(), HandshakeAge: 200, Endpoint: "192.0.2.1:51820"},
		{Name: "same", PublicKey: keys[3].String(), HandshakeAge: -1, Endpoint: "192.0.2.9:51820"},
	}}
	eps := map[Key]string{keys[0]: "198.51.100.1:51820", keys[1]: "gone.example:51820", keys[2]: "moved.example:51820", keys[3]: "same.example:51820"}
	resolve := func(host string) ([]netip.Addr, error) {
		switch host {
		case "moved.example":
			return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil
		case "same.example":
			return []netip.Addr{netip.MustParseAddr("192.0.2.9")}, nil
		case "198.51.100.1":
			t.Error("a literal address was looked up")
		}
		return nil, errors.New("no such host")
	}
	up, err := Reresolve(st, eps, resolve)
	if want := "public_key=" + keys[2].hex() + "\nupdate_only=true\nendpoint=192.0.2.7:51820\n"; up != want {
		t.Errorf("Reresolve = %q, want %q", up, want)
	}
	if err == nil || !strings.Contains(err.Error(), "peer broken: resolve gone.example: no such host") {
		t.Errorf("Reresolve error = %v, want the broken peer's lookup", err)
	}
}
