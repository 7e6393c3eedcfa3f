package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestWGKeys: `gvrouter wg genkey | gvrouter wg pubkey` agrees with
// wg(8) (wireguard-tools) both ways: wg pubkey of our key, and our
// pubkey of wg's key.
func TestWGKeys(t *testing.T) {
	wg, err := exec.LookPath("wg")
	if err != nil {
		netnstest.SkipOrFail(t, "wg (wireguard-tools) is not installed: %v", err)
	}
	run := func(stdin string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return strings.TrimSpace(string(out))
	}
	ours := func(stdin string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := cmdWG(args, strings.NewReader(stdin), &out); err != nil {
			t.Fatalf("gvrouter wg %v: %v", args, err)
		}
		return strings.TrimSpace(out.String())
	}
	for range 5 {
		priv := ours("", "genkey")
		if got, want := ours(priv+"\n", "pubkey"), run(priv+"\n", wg, "pubkey"); got != want || len(got) != 44 {
			t.Errorf("pubkey of our genkey: ours %q, wg's %q", got, want)
		}
		if got := run(priv, wg, "pubkey"); got == "" {
			t.Errorf("wg pubkey refused our key")
		}
		wpriv := run("", wg, "genkey")
		if got, want := ours(wpriv, "pubkey"), run(wpriv, wg, "pubkey"); got != want {
			t.Errorf("pubkey of wg's genkey: ours %q, wg's %q", got, want)
		}
	}
	var out bytes.Buffer
	if err := cmdWG([]string{"pubkey"}, strings.NewReader("not a key"), &out); err == nil {
		t.Errorf("pubkey of junk succeeded: %q", out.String())
	}
}
