package dhcp6client

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/gvrouter/gvrouter/services/internal/leasefile"
)

// restart returns a harness for a client started again with the files
// of h, at h's time plus d.
func restart(t *testing.T, h *harness, d time.Duration, mod func(*Config)) *harness {
	t.Helper()
	return newHarnessAt(t, h.clk.Now().Add(d), func(c *Config) {
		c.LeaseFile, c.DUIDFile = h.cfg.LeaseFile, h.cfg.DUIDFile
		if mod != nil {
			mod(c)
		}
	})
}

// TestRFC8415_18_2_12_SavedLease checks the start with a saved lease:
// Rebind at once (no Solicit, no initial delay) with the retransmission
// parameters of Confirm, the lease applied only when a server confirms it
// or when none answers, and what is not used (expired, corrupt, another
// DUID's).
func TestRFC8415_18_2_12_SavedLease(t *testing.T) {
	bound := func(t *testing.T, mod func(*Config)) (*harness, *Lease) {
		dir := t.TempDir()
		h := newHarness(t, func(c *Config) {
			c.LeaseFile = filepath.Join(dir, "wan.lease")
			c.DUIDFile = filepath.Join(dir, "wan.duid")
			if mod != nil {
				mod(c)
			}
		}).start()
		l := h.bind()
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		return h, l
	}
	t.Run("confirmed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, l := bound(t, nil)
			h2 := restart(t, h, 10*time.Minute, nil).start()
			if !bytes.Equal(h2.c.DUID(), h.c.DUID()) {
				t.Fatalf("DUID after a restart %x, want the saved %x", h2.c.DUID(), h.c.DUID())
			}
			rb := h2.one(dhcpv6.MessageTypeRebind)
			if !rb.at.Equal(h2.clk.Now()) || h2.state() != "confirming" {
				t.Errorf("Rebind at %v in %s, want at once in CONFIRMING", rb.at, h2.state())
			}
			if raw(rb.msg, dhcpv6.OptionServerID) != nil || !slices.Equal(hints(t, iaPDOf(t, rb.msg)), []netip.Prefix{delegated}) {
				t.Errorf("Rebind %v, want no Server Identifier and the saved %v", rb.msg.Summary(), delegated)
			}
			if ch := h2.takeChanges(); len(ch) != 0 || h2.c.Status().Lease != nil {
				t.Errorf("saved lease applied before it is confirmed: %v", ch)
			}
			h2.inject(pkt(server(rb.msg, dhcpv6.MessageTypeReply, server2DUID), server2LL, serverMAC)) // any server may answer
			ch := h2.takeChanges()
			if len(ch) != 1 || ch[0] == nil || ch[0].Prefixes[0].Prefix != l.Prefixes[0].Prefix || !bytes.Equal(ch[0].ServerID, server2DUID) {
				t.Fatalf("OnChange after the confirmation = %+v, want the lease from %x", ch, server2DUID)
			}
			if h2.state() != "bound" || h2.c.Stats().Rebinds.Load() != 1 || h2.c.Stats().Solicits.Load() != 0 {
				t.Errorf("%s, Rebinds %d, Solicits %d; want BOUND, 1, 0", h2.state(), h2.c.Stats().Rebinds.Load(), h2.c.Stats().Solicits.Load())
			}
		})
	})
	t.Run("unanswered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, l := bound(t, nil)
			h2 := restart(t, h, 10*time.Minute, nil).start()
			start := h2.clk.Now()
			h2.clk.Advance(cnfMaxRD - time.Nanosecond)
			var at []time.Duration
			for _, o := range h2.tr.take() {
				if o.msg.MessageType != dhcpv6.MessageTypeRebind {
					t.Fatalf("sent %v in CONFIRMING", o.msg.MessageType)
				}
				at = append(at, o.at.Sub(start))
			}
			// CNF_TIMEOUT 1 s doubling to CNF_MAX_RT 4 s, for CNF_MAX_RD 10 s.
			if want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}; !slices.Equal(at, want) {
				t.Errorf("Rebinds at %v, want %v", at, want)
			}
			if ch := h2.takeChanges(); len(ch) != 0 {
				t.Fatalf("OnChange %v before CNF_MAX_RD", ch)
			}
			h2.clk.Advance(time.Nanosecond)
			ch := h2.takeChanges()
			if len(ch) != 1 || ch[0] == nil {
				t.Fatalf("OnChange after CNF_MAX_RD = %v, want the saved lease (RFC 8415 §18.2.3: SHOULD continue to use it)", ch)
			}
			if diff := cmp.Diff(l, ch[0], eq); diff != "" {
				t.Errorf("lease applied (-saved +got):\n%s", diff)
			}
			if h2.state() != "bound" {
				t.Errorf("state %s, want BOUND (before T1)", h2.state())
			}
			h2.clk.AdvanceTo(l.T1)
			h2.one(dhcpv6.MessageTypeRenew)
		})
	})
	t.Run("past T2", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, l := bound(t, nil)
			h2 := restart(t, h, l.T2.Sub(h.clk.Now())+time.Minute, nil).start()
			h2.clk.Advance(cnfMaxRD)
			h2.tr.take()
			if ch := h2.takeChanges(); len(ch) != 1 || h2.state() != "rebind" {
				t.Errorf("unconfirmed lease past T2: %v in %s, want applied in REBIND", ch, h2.state())
			}
		})
	})
	t.Run("expired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, l := bound(t, nil)
			h2 := restart(t, h, l.Prefixes[0].ValidUntil.Sub(h.clk.Now()), nil).start()
			if h2.state() != "init" {
				t.Errorf("state with an expired saved lease %s, want INIT", h2.state())
			}
			h2.clk.Advance(solMaxDelay)
			h2.one(dhcpv6.MessageTypeSolicit)
		})
	})
	t.Run("corrupt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, _ := bound(t, nil)
			data, _ := os.ReadFile(h.cfg.LeaseFile)
			os.WriteFile(h.cfg.LeaseFile, data[:len(data)/2], 0o600)
			h2 := restart(t, h, time.Minute, nil).start()
			if h2.state() != "init" || h2.c.Stats().LeaseFileErrors.Load() != 1 || h2.c.Status().LeaseFileError == "" {
				t.Errorf("truncated lease file: %s, LeaseFileErrors %d, %q; want INIT, 1, the error", h2.state(), h2.c.Stats().LeaseFileErrors.Load(), h2.c.Status().LeaseFileError)
			}
			h2.bind()
			if data, err := os.ReadFile(h.cfg.LeaseFile); err != nil || !bytes.Contains(data, []byte(delegated.String())) {
				t.Errorf("lease file after the new Reply: %v %s, want it replaced", err, data)
			}
		})
	})
	t.Run("another DUID", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, _ := bound(t, nil)
			os.Remove(h.cfg.DUIDFile)
			h2 := restart(t, h, time.Hour, nil).start() // a new DUID-LLT, made an hour later
			if bytes.Equal(h2.c.DUID(), h.c.DUID()) {
				t.Fatalf("new DUID %x equals the old one", h2.c.DUID())
			}
			if h2.state() != "init" || h2.c.Stats().LeaseFileErrors.Load() != 0 {
				t.Errorf("lease of another DUID: %s, LeaseFileErrors %d; want INIT, 0", h2.state(), h2.c.Stats().LeaseFileErrors.Load())
			}
		})
	})
	t.Run("lost lease removes the file", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, func(c *Config) { c.LeaseFile = filepath.Join(dir, "wan.lease") }).start()
			l := h.bind()
			if _, err := os.Stat(h.cfg.LeaseFile); err != nil {
				t.Fatalf("lease file after bind: %v", err)
			}
			h.clk.AdvanceTo(l.Prefixes[0].ValidUntil)
			if _, err := os.Stat(h.cfg.LeaseFile); !os.IsNotExist(err) {
				t.Errorf("lease file after the loss: %v, want it removed", err)
			}
		})
	})
}

// TestRFC8415_11_DUID checks the DUID: a DUID-LLT made once and kept in
// the DUID file (§11.2), a corrupt file reported and replaced, a DUID-LL
// without a file (§11.4).
func TestRFC8415_11_DUID(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wan.duid")
	h := newHarness(t, func(c *Config) { c.DUIDFile = path })
	d := h.c.DUID()
	secs := uint32(epoch.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) / time.Second)
	want := append(append([]byte{0, 1, 0, 1}, binary.BigEndian.AppendUint32(nil, secs)...), clientMAC...)
	if !bytes.Equal(d, want) {
		t.Errorf("DUID %x, want the DUID-LLT %x", d, want)
	}
	data, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(data)) != hex.EncodeToString(want) {
		t.Errorf("DUID file %q (%v), want %x", data, err, want)
	}
	// An hour later, with another MAC: the same DUID (§11.2: it must not
	// change).
	h2 := newHarness(t, func(c *Config) {
		c.DUIDFile = path
		c.HWAddr = serverMAC
		c.Clock = newFakeClockAt(epoch.Add(time.Hour))
	})
	if !bytes.Equal(h2.c.DUID(), want) || h2.c.Stats().DUIDFileErrors.Load() != 0 {
		t.Errorf("DUID after a restart %x (errors %d), want %x", h2.c.DUID(), h2.c.Stats().DUIDFileErrors.Load(), want)
	}
	for name, junk := range map[string]string{"not hex": "zz\n", "too short": "0001\n", "too long": strings.Repeat("00", 131) + "\n", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			os.WriteFile(path, []byte(junk), 0o644)
			h3 := newHarness(t, func(c *Config) { c.DUIDFile = path })
			if h3.c.Stats().DUIDFileErrors.Load() != 1 || !strings.Contains(h3.c.Status().DUIDFileError, "corrupt") {
				t.Errorf("DUIDFileErrors %d, DUIDFileError %q; want 1 and the cause", h3.c.Stats().DUIDFileErrors.Load(), h3.c.Status().DUIDFileError)
			}
			data, _ := os.ReadFile(path)
			if d, err := decodeDUIDFile(data); err != nil || !bytes.Equal(d, h3.c.DUID()) {
				t.Errorf("DUID file after the replacement %q: %v", data, err)
			}
		})
	}
	h4 := newHarness(t, nil)
	if want := []byte{0, 3, 0, 1, 2, 0, 0, 0, 0, 1}; !bytes.Equal(h4.c.DUID(), want) {
		t.Errorf("DUID without a file %x, want the DUID-LL %x", h4.c.DUID(), want)
	}
}

// TestRFC8415_18_2_7_Release checks the clean stop: with ReleaseOnStop
// the lease is withdrawn first and then released to its server, with
// retransmissions cut short by the Reply or by releaseMaxWait; without,
// nothing is sent and the lease file stays for the next start.
func TestRFC8415_18_2_7_Release(t *testing.T) {
	for _, answered := range []bool{false, true} {
		name := map[bool]string{false: "unanswered", true: "answered"}[answered]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				h := newHarness(t, func(c *Config) { c.ReleaseOnStop, c.LeaseFile = true, filepath.Join(dir, "wan.lease") }).start()
				h.bind()
				stopped := h.clk.Now()
				h.cancel()
				h.cancel = nil
				synctest.Wait()
				rel := h.one(dhcpv6.MessageTypeRelease)
				checkMulticast(t, rel)
				if ch := h.takeChanges(); len(ch) != 1 || ch[0] != nil {
					t.Errorf("OnChange at the stop = %v, want one nil before the Release (RFC 8415 §18.2.7)", ch)
				}
				if !bytes.Equal(raw(rel.msg, dhcpv6.OptionServerID), serverDUID) || !slices.Equal(hints(t, iaPDOf(t, rel.msg)), []netip.Prefix{delegated}) {
					t.Errorf("Release %v, want to %x naming %v", rel.msg.Summary(), serverDUID, delegated)
				}
				if raw(rel.msg, dhcpv6.OptionORO) != nil {
					t.Errorf("Release with an Option Request option (RFC 8415 Appendix B)")
				}
				if _, err := os.Stat(h.cfg.LeaseFile); !os.IsNotExist(err) {
					t.Errorf("lease file after the Release: %v, want it removed", err)
				}
				if answered {
					h.inject(pkt(server(rel.msg, dhcpv6.MessageTypeReply, serverDUID, without(dhcpv6.OptionIAPD)), serverLL, serverMAC))
					select {
					case err := <-h.done:
						if err != nil {
							t.Errorf("Run = %v", err)
						}
					default:
						t.Fatalf("Run still running after the Release's Reply")
					}
					h.none()
					return
				}
				if err := h.waitDone(); err != nil {
					t.Errorf("Run = %v", err)
				}
				var at []time.Duration
				for _, o := range h.tr.take() {
					at = append(at, o.at.Sub(stopped))
				}
				// REL_TIMEOUT 1 s, then 2 s: cut at releaseMaxWait.
				if want := []time.Duration{time.Second}; !slices.Equal(at, want) {
					t.Errorf("Release retransmissions at %v, want %v", at, want)
				}
				if got := h.c.Stats().Releases.Load(); got != 2 || h.state() != "stopped" {
					t.Errorf("Releases %d in %s, want 2 in STOPPED", got, h.state())
				}
			})
		})
	}
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, func(c *Config) { c.LeaseFile = filepath.Join(dir, "wan.lease") }).start()
			h.bind()
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			h.none()
			if ch := h.takeChanges(); len(ch) != 0 {
				t.Errorf("OnChange at a stop without release: %v", ch)
			}
			if _, err := os.Stat(h.cfg.LeaseFile); err != nil {
				t.Errorf("lease file after the stop: %v, want it kept", err)
			}
		})
	})
}

// TestLeaseFileRoundTrip checks the lease file's encoding of every field
// and its refusals.
func TestLeaseFileRoundTrip(t *testing.T) {
	l := &Lease{
		Prefixes: []Prefix{{delegated, time.Hour, Infinite, epoch.Add(time.Hour), epoch.Add(infiniteSpan)}},
		Address:  &Address{leasedAddr, time.Minute, time.Hour, epoch.Add(time.Minute), epoch.Add(time.Hour)},
		DNS:      []netip.Addr{dnsServer}, Domains: []string{"isp.example"},
		ServerID: serverDUID, ServerAddr: serverLL, ServerMAC: serverMAC,
		Acquired: epoch, T1: epoch.Add(time.Minute), T2: epoch.Add(2 * time.Minute),
	}
	duid := duidLLOf(clientMAC)
	data := encodeLease(l, duid, 7)
	back, err := decodeLease(data, duid, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, back, eq); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := decodeLease(data, duid, 8); !errors.Is(err, leasefile.ErrForeign) {
		t.Errorf("decode for another IAID = %v, want leasefile.ErrForeign", err)
	}
	for name, s := range map[string]string{
		"unknown field":  strings.Replace(string(data), `"version"`, `"colour": 1, "version"`, 1),
		"no prefix":      strings.Replace(string(data), delegated.String(), "fe80::/64", 1),
		"version":        strings.Replace(string(data), `"version": 1`, `"version": 2`, 1),
		"trailing":       string(data) + "{}",
		"bad server id":  strings.Replace(string(data), hex.EncodeToString(serverDUID), "zz", 1),
		"times reversed": strings.Replace(string(data), `"t1": "2026-01-02T03:05:05Z"`, `"t1": "2026-01-02T03:07:05Z"`, 1),
	} {
		if _, err := decodeLease([]byte(s), duid, 7); err == nil || errors.Is(err, leasefile.ErrForeign) {
			t.Errorf("decode(%s) = %v, want an error", name, err)
		}
	}
}
