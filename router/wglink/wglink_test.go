package wglink

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/wireguard"
)

// loopback opens the Bind's udp4 socket on 127.0.0.1.
func loopback(network string, port uint16) (wireguard.PacketConn, error) {
	if network != "udp4" {
		return nil, nil
	}
	return net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
}

func key(t *testing.T) wireguard.Key {
	k, err := wireguard.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestApplyAndResolve: the first Apply brings the device up with its
// peers (named in Status); a peer whose endpoint is a host name gets
// the address the resolver gives, soon after Apply and without a
// handshake; Status lists peers by name; a failed lookup is counted as errors/resolve; a second
// Apply that drops a peer leaves the other, with its endpoint.
func TestApplyAndResolve(t *testing.T) {
	lookups := make(chan string, 16)
	fail := false
	l := New(Env{Name: "wg0", Listen: loopback, Resolve: func(host string) ([]netip.Addr, error) {
		lookups <- host
		if fail {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil
	}})
	defer l.Close()
	priv, phone, laptop := key(t), key(t).PublicKey(), key(t).PublicKey()
	c := wireguard.Config{PrivateKey: priv, Peers: []wireguard.Peer{
		{Name: "phone", PublicKey: phone, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32")}},
		{Name: "laptop", PublicKey: laptop, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.3/32")}},
	}}
	if err := l.Apply(c, map[wireguard.Key]string{laptop: "laptop.example:51820"}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-lookups:
		if h != "laptop.example" {
			t.Errorf("looked up %q, want laptop.example", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no lookup after Apply")
	}
	var st wireguard.Status
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if st, err = l.Status(); err != nil {
			t.Fatal(err)
		}
		if len(st.Peers) == 2 && st.Peers[0].Endpoint == "192.0.2.7:51820" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Peers) != 2 || st.Peers[0].Name != "laptop" || st.Peers[1].Name != "phone" || st.Peers[0].Endpoint != "192.0.2.7:51820" ||
		st.PublicKey != priv.PublicKey().String() || st.ListenPort == 0 {
		t.Fatalf("status = %+v, want phone and laptop (at 192.0.2.7:51820), the key and a port", st)
	}

	fail = true
	c.Peers = c.Peers[1:]
	if err := l.Apply(c, map[wireguard.Key]string{laptop: "moved.example:51820"}); err != nil {
		t.Fatal(err)
	}
	<-lookups
	deadline = time.Now().Add(5 * time.Second)
	for {
		st, _ = l.Status()
		if st.Counters["errors"]["resolve"] > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Peers) != 1 || st.Peers[0].Name != "laptop" || st.Peers[0].Endpoint != "192.0.2.7:51820" || st.Counters["errors"]["resolve"] == 0 {
		t.Errorf("after dropping phone with a failing resolver: %+v, want laptop still at 192.0.2.7:51820 and errors/resolve counted", st)
	}
}
