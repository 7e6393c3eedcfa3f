package router

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestMKASecYSwitchSuite: the SecY a participant keys is rebuilt for the
// key server's suite: the running core is a new one of that suite in the
// link (a frame sent through the link is protected by it), the old one is
// closed, the configured cipher is kept, and the switch is logged at Info
// with both suites and no key.
func TestMKASecYSwitchSuite(t *testing.T) {
	var logs bytes.Buffer
	r := &Router{log: slog.New(slog.NewTextHandler(&logs, nil))}
	cakFile := filepath.Join(t.TempDir(), "cak")
	const cakHex = "4a1f9e3c77d20b5e8c61f0a29d3b7c14"
	if err := os.WriteFile(cakFile, []byte(cakHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := natBase + "macsec:\n  - {name: ms1, on: wan, cipher: gcm-aes-256, encrypt: on, pn_store: " + t.TempDir() +
		", mka: {ckn: 6c7072, cak_file: " + cakFile + "}}\n"
	cfg, err := config.Parse("test.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.newSecY(&cfg.MACsec[0], net.HardwareAddr{0x02, 0, 0, 0, 0, 1}, 1500)
	if err != nil {
		t.Fatalf("newSecY: %v", err)
	}
	defer func() {
		rs.stopMKA()
		rs.link.SetSecY(nil)
		rs.secy.Load().Close()
	}()
	old := rs.secy.Load()
	m := mkaSecY{rs: rs, log: r.log}
	if err := m.SwitchCipherSuite(macsec.GCMAES128); err != nil {
		t.Fatalf("SwitchCipherSuite: %v", err)
	}
	now := rs.secy.Load()
	if now == old || now.Config().Cipher != macsec.GCMAES128 || !now.Config().Encrypt || rs.cfg.CipherSuite() != macsec.GCMAES256 {
		t.Fatalf("after the switch: new core %v, cipher %v, encrypt %v, configured %v; want a new GCM-AES-128 core, encrypt on, gcm-aes-256 configured",
			now != old, now.Config().Cipher, now.Config().Encrypt, rs.cfg.CipherSuite())
	}
	// A 32-octet key no longer fits; a 16-octet one does, and the link
	// protects with it (the frame reaches the link's transmit handler,
	// which counts it as there is no lower interface).
	if err := m.InstallTXSA(macsec.SAConfig{AN: 0, PN: 1, Key: macsec.NewKey(make([]byte, 32)), KeyID: []byte{2}}); err == nil {
		t.Error("the rebuilt SecY took a GCM-AES-256 key")
	}
	if err := m.InstallTXSA(macsec.SAConfig{AN: 1, PN: 1, Key: macsec.NewKey(bytes.Repeat([]byte{7}, 16)), KeyID: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetEncodingSA(1); err != nil {
		t.Fatal(err)
	}
	frame := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}, make([]byte, 46)...)
	if _, err := rs.link.WriteFrames([][]byte{frame}); err != nil {
		t.Fatal(err)
	}
	if got := rs.link.Dropped(); got != 1 {
		t.Errorf("link handled %d protected frames, want 1 from the rebuilt SecY", got)
	}
	if st := m.TXSAStats(1); st == nil || st.NextPN.Load() != 2 {
		t.Errorf("rebuilt SecY's TX SA 1: %v, want next PN 2", st)
	}
	// The old core is closed: it protects nothing any more.
	old.Protect([][]byte{append([]byte(nil), frame...)})
	if got := rs.link.Dropped(); got != 1 {
		t.Errorf("the old SecY still protects (link count %d)", got)
	}
	l := logs.String()
	if !strings.Contains(l, "level=INFO") || !strings.Contains(l, "from=gcm-aes-256") || !strings.Contains(l, "to=gcm-aes-128") {
		t.Errorf("switch log %q, want an INFO line with from=gcm-aes-256 to=gcm-aes-128", l)
	}
	if strings.Contains(strings.ToLower(l), cakHex) {
		t.Error("the CAK is in the log")
	}
}
