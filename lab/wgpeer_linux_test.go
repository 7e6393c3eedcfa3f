package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

// The test binary as a WireGuard peer (helperEnv "wgpeer"): wireguard-go
// on a kernel TUN with its standard Bind (recvmmsg, UDP GSO/GRO), in
// whatever namespace it was started in, a second process so that the
// router's CPU time (the test process's) excludes the peer's. It reads
// its device's UAPI configuration from stdin up to a blank line, makes
// the TUN named by GVL_WG_TUN, prints "ready" and runs until stdin
// closes (its parent ended: the peer never outlives the test).
const wgPeerTUNEnv = "GVL_WG_TUN"

// wgPeerMTU is the peer's TUN MTU: wg-quick's default, as the router's.
const wgPeerMTU = 1420

func wgPeer() error {
	name := os.Getenv(wgPeerTUNEnv)
	if name == "" {
		return errors.New(wgPeerTUNEnv + " not set")
	}
	in := bufio.NewReader(os.Stdin)
	var uapi strings.Builder
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the configuration: %w", err)
		}
		if line == "\n" {
			break
		}
		uapi.WriteString(line)
	}
	t, err := tun.CreateTUN(name, wgPeerMTU)
	if err != nil {
		return fmt.Errorf("tun %s: %w", name, err)
	}
	dev := device.NewDevice(t, conn.NewDefaultBind(), device.NewLogger(device.LogLevelError, "wgpeer: "))
	defer dev.Close()
	if err := dev.IpcSet(uapi.String()); err != nil {
		return fmt.Errorf("IpcSet: %w", err)
	}
	if err := dev.Up(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, in)
	return nil
}

// WGPeerCommand is the wgpeer helper in network namespace ns with TUN
// tunName, for the tests of package lab_test; the caller writes the UAPI
// configuration and a blank line to its stdin and waits for "ready".
func WGPeerCommand(ns, tunName string) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=wgpeer", wgPeerTUNEnv+"="+tunName)
	return cmd
}

// ProcCPUSeconds is procCPUSeconds, for package lab_test.
var ProcCPUSeconds = procCPUSeconds

// ParsePing is parsePing for package lab_test: each reply's RTT in ms and
// how many requests went out.
func ParsePing(out []byte) (rtts []float64, sent int, err error) {
	st, err := parsePing(out)
	return st.RTTs, st.Sent, err
}
