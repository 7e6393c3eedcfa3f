package router

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/gvrouter/gvrouter/capture"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestCaptureAllow checks who may use /api/capture per listener: never on
// a wan interface, always on the host interface, elsewhere only with
// the 0600 token file's content.
func TestCaptureAllow(t *testing.T) {
	dir := t.TempDir()
	r := &Router{runDir: dir}
	const token = "0123456789abcdef0123"
	try := func(ic config.Interface, auth string) error {
		hr := httptest.NewRequest("GET", "/api/capture?iface=lan", nil)
		if auth != "" {
			hr.Header.Set("Authorization", auth)
		}
		return r.captureAllowLocked(&ic)(hr)
	}
	wan := config.Interface{Name: "wan", Role: config.RoleWAN}
	lan := config.Interface{Name: "lan", Role: config.RoleLAN}
	host := config.Interface{Name: "host", Role: config.RoleLAN, Host: true}
	path := filepath.Join(dir, capture.TokenFile)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := try(wan, "Bearer "+token); err == nil {
		t.Error("wan listener with the token: allowed, want refused")
	}
	if err := try(host, ""); err != nil {
		t.Errorf("host interface: %v, want allowed", err)
	}
	if err := try(lan, ""); !errors.Is(err, capture.ErrNoToken) {
		t.Errorf("lan without token: %v, want ErrNoToken", err)
	}
	if err := try(lan, "Bearer nope"); !errors.Is(err, capture.ErrNoToken) {
		t.Errorf("lan with a wrong token: %v, want ErrNoToken", err)
	}
	if err := try(lan, "Bearer "+token); err != nil {
		t.Errorf("lan with the token: %v, want allowed", err)
	}
	os.Chmod(path, 0o644)
	if err := try(lan, "Bearer "+token); !errors.Is(err, capture.ErrNoToken) {
		t.Errorf("token file readable by others: %v, want refused", err)
	}
}
