package macsec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestKeyRedaction checks that key bytes never appear in fmt, JSON, slog
// or error output.
func TestKeyRedaction(t *testing.T) {
	raw := []byte{0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc}
	secretHex := hex.EncodeToString(raw)
	k := NewKey(raw)
	sa := SAConfig{AN: 1, Key: k, KeyID: []byte{1}}
	type wrapper struct {
		cfg SAConfig // unexported: fmt cannot call methods here
		k   Key
	}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, k), fmt.Sprintf(verb, sa), fmt.Sprintf(verb, &sa), fmt.Sprintf(verb, wrapper{sa, k}))
	}
	js, err := json.Marshal(sa)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(js))
	var logBuf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&logBuf, nil))
	l.Info("x", "key", k, "sa", sa)
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("x", "key", k, "sa", sa)
	outs = append(outs, logBuf.String())
	_, err = newAEAD(GCMAES256, k) // wrong length
	outs = append(outs, err.Error())
	_, err = ParseKey(secretHex + "zz")
	outs = append(outs, err.Error())
	s, err := New(testConfig(GCMAES256, true, func([][]byte) {}, func([][]byte) {}), slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	err = s.InstallTXSA(sa)
	outs = append(outs, err.Error(), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s))
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: NewKey(append(raw, raw...))}); err != nil {
		t.Fatal(err)
	}
	js, err = json.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(js), fmt.Sprintf("%+v", s.Snapshot()), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s))
	s.Close()
	outs = append(outs, logBuf.String())
	for _, o := range outs {
		for _, needle := range []string{secretHex, strings.ToUpper(secretHex), "deadbeef", "DEADBEEF", "222, 173", "[222 173", "\xde\xad\xbe\xef"} {
			if strings.Contains(o, needle) {
				t.Errorf("key material %q visible in %q", needle, o)
			}
		}
	}
}
