package pppoe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Credentials are the PPP user name and password for PAP and CHAP. The
// password never appears in String, GoString, %v of any verb, or JSON.
type Credentials struct {
	// Username is the PPP peer name, for example "alice@isp.example".
	Username string
	password string
}

// NewCredentials returns Credentials for user and password.
func NewCredentials(user, password string) Credentials {
	return Credentials{Username: user, password: password}
}

// Valid reports whether a user name and password are both set and fit
// PAP's one-octet length fields (RFC 1334 §2.2.1).
func (c Credentials) Valid() bool {
	return c.Username != "" && c.password != "" && len(c.Username) <= 255 && len(c.password) <= 255
}

// String implements fmt.Stringer without the password.
func (c Credentials) String() string {
	return fmt.Sprintf("user %q password <redacted>", c.Username)
}

// GoString implements fmt.GoStringer without the password.
func (c Credentials) GoString() string { return "pppoe.Credentials{" + c.String() + "}" }

// Format implements fmt.Formatter so that no verb (%d, %x, %+v) prints
// the password field.
func (c Credentials) Format(f fmt.State, verb rune) { io.WriteString(f, c.String()) }

// MarshalJSON implements json.Marshaler without the password.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}{c.Username, "<redacted>"})
}

// LoadCredentials reads a credentials file:
//
//	# comment
//	username alice@isp.example
//	password the rest of the line
//
// The file must be a regular file with no permission bits beyond 0600
// (owner read/write): a secrets file others can read is an error, as
// pppd treats chap-secrets. Errors name the file and line, never the
// password.
func LoadCredentials(path string) (Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("pppoe credentials: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Credentials{}, fmt.Errorf("pppoe credentials: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Credentials{}, fmt.Errorf("pppoe credentials %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		return Credentials{}, fmt.Errorf("pppoe credentials %s: mode %04o, want 0600 (chmod 600 %s)", path, perm, path)
	}
	var c Credentials
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "username":
			c.Username = strings.TrimSpace(value)
		case "password":
			c.password = value
		default:
			return Credentials{}, fmt.Errorf("pppoe credentials %s:%d: unknown key %q (want username or password)", path, n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return Credentials{}, fmt.Errorf("pppoe credentials %s: %w", path, err)
	}
	if !c.Valid() {
		return Credentials{}, fmt.Errorf("pppoe credentials %s: need a username and a password, each 1-255 bytes", path)
	}
	return c, nil
}
