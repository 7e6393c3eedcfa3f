package pppoe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSecrets(t *testing.T, mode os.FileMode, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pppoe.secret")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCredentials(t *testing.T) {
	const body = "# ISP account\nusername alice@isp.example\npassword pa ss#word\n"
	for _, tc := range []struct {
		name string
		mode os.FileMode
		body string
		err  string
	}{
		{"0600", 0o600, body, ""},
		{"0400", 0o400, body, ""},
		{"0644 readable by others", 0o644, body, "mode 0644, want 0600"},
		{"0640 readable by group", 0o640, body, "mode 0640"},
		{"0700 executable", 0o700, body, "mode 0700"},
		{"unknown key", 0o600, "user bob\n", ":1: unknown key \"user\""},
		{"no password", 0o600, "username bob\n", "need a username and a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadCredentials(writeSecrets(t, tc.mode, tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadCredentials = %v, want error with %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "pa ss#word") {
					t.Errorf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Username != "alice@isp.example" || c.password != "pa ss#word" {
				t.Errorf("got %q / %q", c.Username, c.password)
			}
		})
	}
	if _, err := LoadCredentials(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	c := NewCredentials("alice", "hunter2-secret")
	type wrap struct {
		C Credentials
		P *Credentials
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		for _, v := range []any{c, &c, wrap{c, &c}, []Credentials{c}} {
			if s := fmt.Sprintf(format, v); strings.Contains(s, "hunter2") || strings.Contains(s, fmt.Sprintf("%x", "hunter2")) {
				t.Errorf("Sprintf(%q) = %s", format, s)
			}
		}
	}
	b, _ := json.Marshal(wrap{c, &c})
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("json = %s", b)
	}
	cfg := Config{Local: clientMAC, Credentials: c}
	if s := fmt.Sprintf("%+v %#v", cfg, cfg); strings.Contains(s, "hunter2") {
		t.Errorf("Config printed the password: %s", s)
	}
}
