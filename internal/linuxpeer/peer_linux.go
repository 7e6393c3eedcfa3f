package linuxpeer

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

//go:embed peer.sh
var peerScript []byte

//go:embed init
var guestInit []byte

const (
	// GuestMAC is the guest's virtio NIC address (QEMU's locally
	// administered 52:54:00 prefix).
	GuestMAC = "52:54:00:77:00:02"
	// HostMAC is the tap's address, a locally administered one.
	HostMAC = "02:00:00:77:00:01"
	// GuestMAC2 and HostMAC2 are the second NIC's (Options.Tap2).
	GuestMAC2 = "52:54:00:77:00:03"
	HostMAC2  = "02:00:00:77:00:03"
	// defaultBootTimeout bounds the wait for "LPEER READY": a boot takes
	// about 5 s under TCG on 2 idle cores, several times that on a busy
	// CI machine.
	defaultBootTimeout = 60 * time.Second
	// defaultUptime is the longest a guest stays up without a command, so
	// that a test killed before Stop leaves no QEMU running for long.
	defaultUptime = 120
	// pollInterval is how often the console file is read while waiting.
	pollInterval = 50 * time.Millisecond
)

// Image is the cached guest image Prepare built.
type Image struct {
	Kernel string // the guest kernel, e.g. /var/tmp/gvrouter-linuxpeer/v4/kernel
	Base   string // the initramfs without /init and /job.env
}

var prepareOnce struct {
	sync.Mutex
	img *Image
}

// Prepare builds the guest image if it is not cached yet, installing the
// Debian packages it needs when they are missing (as root, with apt-get),
// and returns it. It is safe for concurrent use, also across processes
// (peer.sh holds a lock).
func Prepare(ctx context.Context) (*Image, error) {
	prepareOnce.Lock()
	defer prepareOnce.Unlock()
	if prepareOnce.img != nil {
		return prepareOnce.img, nil
	}
	dir, err := os.MkdirTemp("", "linuxpeer-prepare")
	if err != nil {
		return nil, fmt.Errorf("linuxpeer: prepare: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "peer.sh")
	if err := os.WriteFile(script, peerScript, 0o755); err != nil {
		return nil, fmt.Errorf("linuxpeer: prepare: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/bash", script, "prepare")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("linuxpeer: peer.sh prepare: %w: %s", err, lastLines(stderr.String(), 20))
	}
	f := strings.Fields(stdout.String())
	if len(f) != 2 {
		return nil, fmt.Errorf("linuxpeer: peer.sh prepare printed %q, want the kernel and initramfs paths", stdout.String())
	}
	prepareOnce.img = &Image{Kernel: f[0], Base: f[1]}
	return prepareOnce.img, nil
}

// Options describe one guest.
type Options struct {
	// Job is what the guest sets up: "plain" (ADDR on eth0), "vlan"
	// (VLANS), "macsec" (a static-key SecY macsec0), "mka"
	// (wpa_supplicant's MKA on eth0) or "pppoe" (pppoe-server and pppd
	// as the access concentrator on eth0, ADDR on lo behind it).
	Job string
	// Env are the guest's settings (README.md), e.g. {"CIPHER":
	// "gcm-aes-256", "TXKEY": "..."}; unset ones get their defaults.
	Env map[string]string
	// Netns is the namespace the tap is made in, e.g. one from
	// netnstest.New. If empty, Start makes "lpeer-PID-N" and Stop
	// deletes it.
	Netns string
	// Tap is the tap's name, e.g. "lptap0" (the default).
	Tap string
	// Tap2, if set, is a second tap in Netns, the guest's eth1 (which
	// the guest leaves down: a command sets it up), e.g. "lptap1".
	Tap2 string
	// KVM runs the guest with KVM instead of TCG, for a guest that
	// must keep up with a load (a router at 100 Mbit/s); the caller
	// checks that /dev/kvm works.
	KVM bool
	// BootTimeout bounds the wait for the guest; 0 means 60 s.
	BootTimeout time.Duration
}

// Peer is a running guest. Its methods are safe for concurrent use.
type Peer struct {
	// Netns and Tap are where the guest's NIC is: the program under test
	// opens Tap inside Netns. Tap2 is the second NIC's, if any.
	Netns, Tap, Tap2 string
	// Env are the guest's settings as it got them, defaults filled in
	// (the random keys among them).
	Env map[string]string
	// Boot is the time from Start until the guest was ready.
	Boot time.Duration

	run     string // the run directory
	madeNS  bool
	cmd     *exec.Cmd
	exited  chan struct{} // closed when QEMU has exited
	ctl     *os.File      // the guest's ttyS1, for commands
	ctlOut  *os.File      // ttyS1's output side, drained so QEMU never blocks
	mu      sync.Mutex    // mu serialises Run and Stop
	ncmd    int           // commands sent, under mu
	stopped bool          // under mu
	console string        // the console output, kept by cleanup
}

var nsCounter atomic.Int32

// defaults returns the guest's settings for opts: the job's defaults,
// overridden by opts.Env. Keys and salt are random.
func defaults(opts Options) map[string]string {
	n := 16
	if strings.Contains(opts.Env["CIPHER"], "256") {
		n = 32
	}
	env := map[string]string{
		"JOB": opts.Job, "UPTIME": strconv.Itoa(defaultUptime),
		"ADDR": "10.77.0.2/24", "VLANS": "10:10.77.10.2/24 20:10.77.20.2/24", "GUEST_CMD": "",
		"CIPHER": "gcm-aes-128", "ENCRYPT": "on", "MACSEC_OPTS": "",
		"SCI": strings.ReplaceAll(GuestMAC, ":", "") + "0001", "PEER_SCI": strings.ReplaceAll(HostMAC, ":", "") + "0001",
		"TXKEY": randHex(n), "RXKEY": randHex(n), "SSCI": "2", "PEER_SSCI": "1", "SALT": randHex(12),
		"MKA_CAK": randHex(16), "MKA_CKN": randHex(32), "MKA_PRIORITY": "255",
		"MKA_INTEG_ONLY": "0", "MKA_PORT": "1", "WPA_OPTS": "-dd -K -t",
		"PPP_USER": "alice", "PPP_PASSWORD": randHex(8), "PPP_AUTH": "chap", "PPP_LOCAL": "10.64.0.1",
		"PPP_REMOTE": "10.64.0.10", "PPP_DNS": "10.64.0.53", "PPP_AC": "lpeer-ac", "PPP_SERVICE": "internet", "PPPOE_OPTS": "", "PPP_VLAN": "",
		"ADDR6": "fd77:9::1/128", "PPP_PD_POOL": "fd77:8000::/48", "PPP_PD_LEN": "56", "PPP_MTU": "",
	}
	maps.Copy(env, opts.Env)
	return env
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// shellQuote quotes s for the guest's sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Start boots a guest for opts and returns once it printed "LPEER READY".
// On error everything it made is removed again; the error carries the
// guest's console output.
func Start(ctx context.Context, opts Options) (_ *Peer, err error) {
	t0 := time.Now()
	switch opts.Job {
	case "plain", "vlan", "macsec", "mka", "pppoe":
	default:
		return nil, fmt.Errorf("linuxpeer: unknown job %q", opts.Job)
	}
	img, err := Prepare(ctx)
	if err != nil {
		return nil, err
	}
	p := &Peer{Netns: opts.Netns, Tap: opts.Tap, Tap2: opts.Tap2, Env: defaults(opts), exited: make(chan struct{})}
	if p.Tap == "" {
		p.Tap = "lptap0"
	}
	defer func() {
		if err != nil {
			p.cleanup()
		}
	}()
	if p.Netns == "" {
		p.Netns = fmt.Sprintf("lpeer-%d-%d", os.Getpid(), nsCounter.Add(1))
		if err := run("ip", "netns", "add", p.Netns); err != nil {
			return nil, err
		}
		p.madeNS = true
	}
	steps := [][]string{
		{"-n", p.Netns, "tuntap", "add", "dev", p.Tap, "mode", "tap"},
		{"-n", p.Netns, "link", "set", p.Tap, "address", HostMAC, "up"},
		{"-n", p.Netns, "link", "set", "lo", "up"},
	}
	if p.Tap2 != "" {
		steps = append(steps,
			[]string{"-n", p.Netns, "tuntap", "add", "dev", p.Tap2, "mode", "tap"},
			[]string{"-n", p.Netns, "link", "set", p.Tap2, "address", HostMAC2, "up"})
	}
	for _, args := range steps {
		if err := run("ip", args...); err != nil {
			return nil, err
		}
	}
	if p.run, err = os.MkdirTemp(filepath.Dir(img.Base), "run."); err != nil {
		return nil, fmt.Errorf("linuxpeer: %w", err)
	}
	initrd, err := p.initrd(img)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"ctl.in", "ctl.out"} {
		if err := unix.Mkfifo(filepath.Join(p.run, f), 0o600); err != nil {
			return nil, fmt.Errorf("linuxpeer: mkfifo: %w", err)
		}
	}
	// O_RDWR: opening a FIFO so never blocks, whether or not QEMU has it open.
	if p.ctl, err = os.OpenFile(filepath.Join(p.run, "ctl.in"), os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("linuxpeer: %w", err)
	}
	if p.ctlOut, err = os.OpenFile(filepath.Join(p.run, "ctl.out"), os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("linuxpeer: %w", err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := p.ctlOut.Read(buf); err != nil {
				return
			}
		}
	}()
	if err := os.WriteFile(p.consolePath(), nil, 0o600); err != nil {
		return nil, fmt.Errorf("linuxpeer: %w", err)
	}
	accel, cpu := "tcg", "max"
	if opts.KVM {
		// Without arch-capabilities: nested KVM here refuses QEMU's
		// write of that MSR (0x10a) and QEMU aborts.
		accel, cpu = "kvm", "host,-arch-capabilities"
	}
	args := []string{"netns", "exec", p.Netns, "qemu-system-x86_64", "-accel", accel, "-cpu", cpu,
		"-m", "256M", "-smp", "1", "-nodefaults", "-nographic", "-no-reboot", "-monitor", "none"}
	if _, err := os.Stat("/usr/share/qemu/qboot.rom"); err == nil {
		args = append(args, "-bios", "/usr/share/qemu/qboot.rom") // boots faster than SeaBIOS
	}
	// IPv6 only where a job speaks it: the pppoe job's PPP links (the
	// guest's init keeps it off its Ethernet NICs); elsewhere the guest
	// sends no IPv6 at all to disturb a test's counters.
	cmdline := "console=ttyS0 quiet panic=-1 ipv6.disable=1"
	if opts.Job == "pppoe" {
		cmdline = "console=ttyS0 quiet panic=-1"
	}
	args = append(args, "-kernel", img.Kernel, "-initrd", initrd,
		"-append", cmdline,
		"-serial", "file:"+p.consolePath(), "-serial", "pipe:"+filepath.Join(p.run, "ctl"),
		"-netdev", "tap,id=n0,ifname="+p.Tap+",script=no,downscript=no,vnet_hdr=off",
		"-device", "virtio-net-pci,netdev=n0,mac="+GuestMAC+",romfile=")
	if p.Tap2 != "" {
		args = append(args, "-netdev", "tap,id=n1,ifname="+p.Tap2+",script=no,downscript=no,vnet_hdr=off",
			"-device", "virtio-net-pci,netdev=n1,mac="+GuestMAC2+",romfile=")
	}
	p.cmd = exec.Command("ip", args...)
	qlog, err := os.Create(filepath.Join(p.run, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("linuxpeer: %w", err)
	}
	defer qlog.Close()
	p.cmd.Stdout, p.cmd.Stderr = qlog, qlog
	// Pdeathsig: a test binary that dies leaves no QEMU behind.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("linuxpeer: start qemu: %w", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	timeout := opts.BootTimeout
	if timeout == 0 {
		timeout = defaultBootTimeout
	}
	if _, err := p.WaitConsole(ctx, readyRE, timeout); err != nil {
		q, _ := os.ReadFile(filepath.Join(p.run, "qemu.log"))
		return nil, fmt.Errorf("linuxpeer: %s guest not ready: %w\nconsole:\n%s\nqemu: %s", opts.Job, err, p.Console(), q)
	}
	p.Boot = time.Since(t0)
	return p, nil
}

var (
	readyRE  = regexp.MustCompile(`(?m)^LPEER READY`)
	failedRE = regexp.MustCompile(`(?m)^LPEER (SETUP-FAILED.*)$`)
)

// initrd writes the run's initramfs: the cached base plus a second cpio
// archive with /init and /job.env (the kernel unpacks both in turn).
func (p *Peer) initrd(img *Image) (string, error) {
	job := filepath.Join(p.run, "job")
	if err := os.Mkdir(job, 0o700); err != nil {
		return "", fmt.Errorf("linuxpeer: %w", err)
	}
	var env strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		fmt.Fprintf(&env, "%s=%s\n", k, shellQuote(p.Env[k]))
	}
	if err := os.WriteFile(filepath.Join(job, "init"), guestInit, 0o755); err != nil {
		return "", fmt.Errorf("linuxpeer: %w", err)
	}
	if err := os.WriteFile(filepath.Join(job, "job.env"), []byte(env.String()), 0o644); err != nil {
		return "", fmt.Errorf("linuxpeer: %w", err)
	}
	var cpio, stderr bytes.Buffer
	cmd := exec.Command("cpio", "-o", "-H", "newc", "--quiet")
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = job, strings.NewReader("init\njob.env\n"), &cpio, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("linuxpeer: cpio: %w: %s", err, stderr.Bytes())
	}
	base, err := os.ReadFile(img.Base)
	if err != nil {
		return "", fmt.Errorf("linuxpeer: %w", err)
	}
	path := filepath.Join(p.run, "initrd")
	if err := os.WriteFile(path, append(base, cpio.Bytes()...), 0o600); err != nil {
		return "", fmt.Errorf("linuxpeer: %w", err)
	}
	return path, nil
}

func (p *Peer) consolePath() string { return filepath.Join(p.run, "console.log") }

// Console returns the guest's console output so far, without carriage
// returns.
func (p *Peer) Console() string {
	b, _ := os.ReadFile(p.consolePath())
	return strings.ReplaceAll(string(b), "\r", "")
}

// ErrExited is returned by a wait when the guest has powered off.
var ErrExited = errors.New("linuxpeer: guest exited")

// WaitConsole waits up to d until the console output matches re and
// returns the first match (with its submatches). It gives up early when
// the guest reports a failed setup or exits.
func (p *Peer) WaitConsole(ctx context.Context, re *regexp.Regexp, d time.Duration) ([]string, error) {
	deadline := time.Now().Add(d)
	for {
		c := p.Console()
		if m := re.FindStringSubmatch(c); m != nil {
			return m, nil
		}
		if m := failedRE.FindStringSubmatch(c); m != nil {
			return nil, fmt.Errorf("linuxpeer: guest: %s", m[1])
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.Console()); m != nil {
				return m, nil
			}
			return nil, ErrExited
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("linuxpeer: no %q on the console after %v", re, d)
		}
	}
}

// Run runs the shell command line (one line) in the guest, waiting up to
// d, and returns its output (stdout and stderr). A non-zero exit status
// is an error that carries the output.
func (p *Peer) Run(ctx context.Context, line string, d time.Duration) (string, error) {
	if strings.ContainsAny(line, "\n\r") {
		return "", errors.New("linuxpeer: Run: the command must be one line")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return "", errors.New("linuxpeer: Run: guest stopped")
	}
	p.ncmd++
	n := p.ncmd
	if _, err := p.ctl.WriteString(line + "\n"); err != nil {
		return "", fmt.Errorf("linuxpeer: Run: %w", err)
	}
	re := regexp.MustCompile(fmt.Sprintf(`(?ms)^LPEER CMD %d BEGIN\n(.*?)^LPEER CMD %d END rc=(\d+)$`, n, n))
	m, err := p.WaitConsole(ctx, re, d)
	if err != nil {
		return "", fmt.Errorf("linuxpeer: Run %q: %w", line, err)
	}
	if m[2] != "0" {
		return m[1], fmt.Errorf("linuxpeer: guest: %q exited with status %s: %s", line, m[2], m[1])
	}
	return m[1], nil
}

// Stop asks the guest to print its statistics (ip -s macsec show, ip -s
// link) and power off, kills QEMU if it has not within 10 s, removes what
// Start made and returns the console output. It is safe to call twice.
func (p *Peer) Stop() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		p.ctl.WriteString("stop\n")
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
		p.cleanup()
	}
	return p.console
}

// PID is QEMU's process ID (its CPU time is the guest's).
func (p *Peer) PID() int { return p.cmd.Process.Pid }

// cleanup kills QEMU (by PID) and removes the tap, the namespace if
// Start made it and the run directory, keeping the console output.
func (p *Peer) cleanup() {
	if p.cmd != nil && p.cmd.Process != nil {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if p.run != "" {
		p.console = p.Console()
	}
	for _, f := range []*os.File{p.ctl, p.ctlOut} {
		if f != nil {
			f.Close()
		}
	}
	if p.Netns != "" {
		exec.Command("ip", "-n", p.Netns, "link", "del", p.Tap).Run()
		if p.Tap2 != "" {
			exec.Command("ip", "-n", p.Netns, "link", "del", p.Tap2).Run()
		}
		if p.madeNS {
			exec.Command("ip", "netns", "del", p.Netns).Run()
		}
	}
	if p.run != "" && os.Getenv("LINUXPEER_KEEP") == "" {
		os.RemoveAll(p.run)
	}
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("linuxpeer: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
