package wireguard

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestUpdateKeepsSessions: a reload that adds a peer and removes another
// (UpdateUAPI) leaves the live peer's session alone: no new handshake,
// its counters keep counting, and the tunnel carries traffic at once.
// UAPI's replace_peers, the first stage's only way, drops the session
// (the last subtest shows it, so the test can fail).
func TestUpdateKeepsSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
		uapi func(next, old *Config) string
	}{
		{"update", true, func(next, old *Config) string { return next.UpdateUAPI(old) }},
		{"replace", false, func(next, old *Config) string { return next.UAPI() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t)
			ping(t, a, b)
			old := Config{PrivateKey: b.key, Peers: []Peer{a.peerOf(false), {Name: "gone", PublicKey: mustKey(t).PublicKey(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.9/32")}}}}
			if err := b.dev.IpcSet(old.UpdateUAPI(&Config{PrivateKey: b.key, Peers: old.Peers[:1]})); err != nil {
				t.Fatal(err)
			}
			before := b.status(t)
			var was *PeerStatus // the device lists peers in no fixed order
			for i, p := range before.Peers {
				if p.PublicKey == a.key.PublicKey().String() {
					was = &before.Peers[i]
				}
			}
			if len(before.Peers) != 2 || was == nil || was.HandshakeAge < 0 {
				t.Fatalf("before: %+v", before.Peers)
			}
			newKey := mustKey(t).PublicKey()
			next := Config{PrivateKey: b.key, Peers: []Peer{{Name: "new", PublicKey: newKey, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.3/32")}}, a.peerOf(false)}}
			text := tc.uapi(&next, &old)
			if tc.keep && strings.Contains(text, a.key.PublicKey().hex()) {
				t.Errorf("UpdateUAPI mentions the unchanged peer:\n%s", text)
			}
			if err := b.dev.IpcSet(text); err != nil {
				t.Fatal(err)
			}
			after := b.status(t)
			var live *PeerStatus
			keys := map[string]bool{}
			for i, p := range after.Peers {
				keys[p.PublicKey] = true
				if p.PublicKey == a.key.PublicKey().String() {
					live = &after.Peers[i]
				}
			}
			if len(after.Peers) != 2 || !keys[newKey.String()] || live == nil {
				t.Fatalf("after the reload: peers %+v, want the new one and a", after.Peers)
			}
			kept := live.LastHandshake.Equal(was.LastHandshake) && live.RxBytes >= was.RxBytes && live.RxBytes > 0
			if kept != tc.keep {
				t.Errorf("session kept = %v, want %v: before %+v, after %+v", kept, tc.keep, *was, *live)
			}
			if tc.keep {
				ping(t, b, a) // b has no endpoint for a: only the kept session knows it
			}
		})
	}
}

func mustKey(t *testing.T) Key {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// status reads n's Status.
func (n *node) status(t *testing.T) Status {
	t.Helper()
	uapi, err := n.dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(uapi, nil, Stats{&n.bind.Stats, &n.tun.Stats, &n.stats}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
