package router

import (
	"errors"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/gvrouter/gvrouter/capture"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestCaptureAllow checks who may use /api/capture per listener and per
// caller: never on a wan interface; without the token only the machine
// itself (the host kernel's address on a netstack listener, loopback on
// a host socket); anyone else, a LAN host on the host interface's or a
// host socket's listener included, only with the 0600 token file's
// content.
func TestCaptureAllow(t *testing.T) {
	dir := t.TempDir()
	r := &Router{}
	r.state.runDir = dir
	kernel := []netip.Addr{netip.MustParseAddr("10.255.0.2"), netip.MustParseAddr("fd00:ff::2")}
	r.hostKernel.Store(&kernel)
	const token = "0123456789abcdef0123"
	wan := config.Interface{Name: "wan", Role: config.RoleWAN}
	lan := config.Interface{Name: "lan", Role: config.RoleLAN}
	host := config.Interface{Name: "host", Role: config.RoleLAN, Host: true}
	socket := config.Interface{Name: "socket"} // a host socket listener
	path := filepath.Join(dir, capture.TokenFile)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	try := func(ic config.Interface, from, auth string) error {
		hr := httptest.NewRequest("GET", "/api/capture?iface=lan", nil)
		hr.RemoteAddr = from
		if auth != "" {
			hr.Header.Set("Authorization", auth)
		}
		if ic.Name == "socket" {
			return r.captureAllowSocketLocked()(hr)
		}
		return r.captureAllowLocked(&ic)(hr)
	}
	const (
		lanHost  = "192.168.1.10:40000"
		kernel4  = "10.255.0.2:40000"
		kernel6  = "[fd00:ff::2]:40000"
		mapped   = "[::ffff:10.255.0.2]:40000"
		loop4    = "127.0.0.1:40000"
		loop6    = "[::1]:40000"
		router   = "10.255.0.1:40000" // the router's host address: masqueraded, not the kernel
		noToken  = ""
		badToken = "Bearer nope"
		good     = "Bearer " + token
	)
	for _, tt := range []struct {
		name     string
		ic       config.Interface
		from     string
		auth     string
		want     bool
		wantNoTk bool // the refusal is ErrNoToken
	}{
		{"wan with the token", wan, lanHost, good, false, false},
		{"wan from the kernel", wan, kernel4, noToken, false, false},
		{"host interface from the kernel", host, kernel4, noToken, true, false},
		{"host interface from the kernel, ipv6", host, kernel6, noToken, true, false},
		{"host interface from the kernel, mapped", host, mapped, noToken, true, false},
		{"host interface from a LAN host", host, lanHost, noToken, false, true},
		{"host interface from the router's address", host, router, noToken, false, true},
		{"host interface from a LAN host with the token", host, lanHost, good, true, false},
		{"lan from the kernel", lan, kernel4, noToken, true, false},
		{"lan from a LAN host", lan, lanHost, noToken, false, true},
		{"lan with a wrong token", lan, lanHost, badToken, false, true},
		{"lan with the token", lan, lanHost, good, true, false},
		{"lan from a loopback source", lan, loop4, noToken, false, true},
		{"socket from loopback", socket, loop4, noToken, true, false},
		{"socket from loopback, ipv6", socket, loop6, noToken, true, false},
		{"socket from a LAN host", socket, lanHost, noToken, false, true},
		{"socket from the kernel's TAP address", socket, kernel4, noToken, false, true},
		{"socket from a LAN host with the token", socket, lanHost, good, true, false},
		{"bad remote address", socket, "nonsense", noToken, false, true},
	} {
		err := try(tt.ic, tt.from, tt.auth)
		if tt.want && err != nil || !tt.want && err == nil {
			t.Errorf("%s: allow(from %s, %q) = %v, want allowed %v", tt.name, tt.from, tt.auth, err, tt.want)
		}
		if tt.wantNoTk && !errors.Is(err, capture.ErrNoToken) {
			t.Errorf("%s: allow(from %s) = %v, want ErrNoToken", tt.name, tt.from, err)
		}
	}
	os.Chmod(path, 0o644)
	if err := try(lan, lanHost, good); !errors.Is(err, capture.ErrNoToken) {
		t.Errorf("token file readable by others: %v, want refused", err)
	}
	r.state.runDir = ""
	if err := try(host, lanHost, good); err == nil {
		t.Error("no run directory: allowed, want refused")
	}
	if err := try(socket, loop4, noToken); err != nil {
		t.Errorf("no run directory, loopback: %v, want allowed", err)
	}
}
