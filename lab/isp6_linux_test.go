package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestISP6Configs: the lab ISP's kea-dhcp6 and radvd accept the configs
// the lab writes (each daemon's own config check), so a lab run cannot
// fail later on a typo in them.
func TestISP6Configs(t *testing.T) {
	requirePrivileged(t, "kea-dhcp6", "radvd")
	l := &lab{dir: t.TempDir()}
	kc, err := l.keaConfig(isp6Options{})
	if err != nil {
		t.Fatal(err)
	}
	kpath := filepath.Join(l.dir, "kea-dhcp6.conf")
	rpath := filepath.Join(l.dir, "radvd.conf")
	if err := os.WriteFile(kpath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rpath, []byte(radvdConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("kea-dhcp6", "-t", kpath)
	cmd.Env = append(os.Environ(), "KEA_LOCKFILE_DIR="+l.dir, "KEA_PIDFILE_DIR="+l.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("kea-dhcp6 -t: %v\n%s\n%s", err, out, kc)
	}
	if out, err := exec.Command("radvd", "--configtest", "--config="+rpath, "--logmethod=stderr").CombinedOutput(); err != nil {
		t.Errorf("radvd --configtest: %v\n%s", err, out)
	}
}
