package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// buildMACsec creates the MACsec lab's namespaces, veths, host addresses
// and routes, and the routers' sysctls.
func (l *lab) buildMACsec(ctx context.Context) error {
	for _, ns := range []string{l.lanNS, l.rtrNS, l.rtr2NS, l.wanNS} {
		if err := addNetns(ctx, ns); err != nil {
			return err
		}
		l.namespaces = append(l.namespaces, ns)
	}
	for _, ns := range []string{l.rtrNS, l.rtr2NS} {
		err := inNetns(ns, func() error {
			for _, s := range routerSysctls {
				if err := writeSysctl(s.path, s.value, s.optional); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("lab: router namespace %s sysctls: %w", ns, err)
		}
	}
	steps := [][]string{
		{l.rtrNS, "ip", "link", "add", lanPort, "type", "veth", "peer", "name", hostIf, "netns", l.lanNS},
		{l.rtrNS, "ip", "link", "add", msPort, "type", "veth", "peer", "name", msPort, "netns", l.rtr2NS},
		{l.rtr2NS, "ip", "link", "add", wanPort, "type", "veth", "peer", "name", hostIf, "netns", l.wanNS},
		{l.rtrNS, "ip", "link", "set", "lo", "up"},
		{l.rtrNS, "ip", "link", "set", lanPort, "up"},
		{l.rtrNS, "ip", "link", "set", msPort, "up"},
		{l.rtr2NS, "ip", "link", "set", "lo", "up"},
		{l.rtr2NS, "ip", "link", "set", msPort, "up"},
		{l.rtr2NS, "ip", "link", "set", wanPort, "up"},
	}
	steps = append(steps, l.hostSteps()...)
	for _, s := range steps {
		if err := nsRun(ctx, s[0], s[1], s[2:]...); err != nil {
			return err
		}
	}
	for _, e := range []struct{ ns, ifname string }{
		{l.rtrNS, lanPort}, {l.rtrNS, msPort}, {l.rtr2NS, msPort}, {l.rtr2NS, wanPort},
		{l.lanNS, hostIf}, {l.wanNS, hostIf},
	} {
		if err := setWireLike(e.ns, e.ifname); err != nil {
			return err
		}
	}
	l.log.Debug("lab: MACsec topology built", "lan", l.lanNS, "router1", l.rtrNS, "router2", l.rtr2NS, "wan", l.wanNS)
	return nil
}

// macsecKeys writes the lab's two SAKs (random, one per direction) to
// files of mode 0600 in the run directory, once per run, and returns the
// SecY options with their names.
func (l *lab) macsecKeys() (macsecOptions, error) {
	o := l.msOpt
	if o.cipher == "" {
		o.cipher, o.encrypt = msCipher, true
	}
	keyLen := 16
	if o.cipher == "gcm-aes-256" || o.cipher == "gcm-aes-xpn-256" {
		keyLen = 32
	}
	for i, p := range []*string{&o.keyFile1, &o.keyFile2} {
		*p = filepath.Join(l.dir, fmt.Sprintf("ms-router%d-%d.key", i+1, keyLen*8))
		if _, err := os.Stat(*p); err == nil {
			continue
		}
		k := make([]byte, keyLen)
		rand.Read(k)
		if err := os.WriteFile(*p, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
			return o, fmt.Errorf("lab: macsec key: %w", err)
		}
	}
	if o.mka {
		o.cakFile = filepath.Join(l.dir, "ms-cak.key")
		if _, err := os.Stat(o.cakFile); err != nil {
			k := make([]byte, 16)
			rand.Read(k)
			if err := os.WriteFile(o.cakFile, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
				return o, fmt.Errorf("lab: mka cak: %w", err)
			}
		}
	}
	o.pnStore1 = filepath.Join(l.dir, "pn-router1")
	o.pnStore2 = filepath.Join(l.dir, "pn-router2")
	return o, nil
}

// startMACsecPeer starts router 2 of the MACsec lab and returns router 1's
// config, for startRouterWith to start router 1 as the lab's router.
func (l *lab) startMACsecPeer(ctx context.Context, args ...string) ([]byte, error) {
	o, err := l.macsecKeys()
	if err != nil {
		return nil, err
	}
	o.driver = l.opt.Driver
	cfg2, err := macsecRouterConfig(l.prefix, 2, routerStatusPort, o)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(l.dir, "lab-router2.yaml")
	if err := os.WriteFile(cfgPath, l.ownStateDir(cfg2, "router2"), 0o600); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	bin, err := filepath.Abs(l.opt.RouterBinary)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if err := l.stopRouter2(); err != nil {
		return nil, err
	}
	logPath := filepath.Join(l.dir, "router2.log")
	l.router2, err = startChild(l.log, "router2", l.rtr2NS, logPath, l.runCommand(bin, cfgPath, "router2", args)...)
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(routerStatusPort) + "/api/status"
	deadline := time.Now().Add(routerStartTimeout)
	for {
		_, err := httpGet(ctx, l.rtr2NS, url)
		if err == nil {
			break
		}
		if l.router2.exited() {
			return nil, fmt.Errorf("lab: router2 exited (%v); %s:\n%s", l.router2.err, logPath, tail(logPath, 2000))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("lab: router2 did not answer in %s within %v: %w; %s:\n%s",
				l.rtr2NS, routerStartTimeout, err, logPath, tail(logPath, 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o.driver != "" {
		if err := l.checkDrivers(ctx, l.rtr2NS, []string{wanPort, msPort}, o.driver); err != nil {
			return nil, fmt.Errorf("%w; %s:\n%s", err, logPath, tail(logPath, 2000))
		}
	}
	l.log.Info("lab: router2 is up", "pid", l.router2.cmd.Process.Pid, "config", cfgPath, "log", logPath)
	return macsecRouterConfig(l.prefix, 1, routerStatusPort, o)
}

// stopRouter2 stops router 2 if it runs.
func (l *lab) stopRouter2() error {
	if l.router2 == nil {
		return nil
	}
	err := l.router2.stop()
	l.router2 = nil
	if err != nil {
		return fmt.Errorf("lab: router2: %w", err)
	}
	return nil
}
