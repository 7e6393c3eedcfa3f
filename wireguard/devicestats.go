package wireguard

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/device"
)

// DeviceStats counts what the WireGuard device rejects, by reason. The
// device keeps no counters of its own: it reports each event once through
// its Logger with a constant format string, and Logger counts those
// formats here (the strings are wireguard-go's at the version go.mod
// pins; TestDeviceStatsFormats checks each one is in its source).
type DeviceStats struct {
	// InvalidMAC1 counts handshake messages whose MAC1 did not match our
	// public key: sent to someone else, or forged.
	InvalidMAC1 atomic.Uint64 `counter:"handshake/invalid_mac1"`
	// InvalidInitiation counts initiations that passed MAC1 but failed
	// to decrypt or named no configured peer (a wrong-key peer).
	InvalidInitiation atomic.Uint64 `counter:"handshake/invalid_initiation"`
	// InvalidResponse counts responses that did not complete a handshake
	// we started.
	InvalidResponse atomic.Uint64 `counter:"handshake/invalid_response"`
	// HandshakeReplay counts initiations with a timestamp not newer than
	// the peer's last one (a replayed initiation, whitepaper §5.1).
	HandshakeReplay atomic.Uint64 `counter:"handshake/replay"`
	// HandshakeFlood counts initiations from a peer within the minimum
	// interval of its previous one (whitepaper §5.1).
	HandshakeFlood atomic.Uint64 `counter:"handshake/flood"`
	// CookieRepliesSent counts cookie replies sent instead of a response
	// while the device was under load (whitepaper §5.3).
	CookieRepliesSent atomic.Uint64 `counter:"handshake/cookie_reply_sent"`
	// InvalidCookieReply counts cookie replies that did not decrypt.
	InvalidCookieReply atomic.Uint64 `counter:"handshake/invalid_cookie_reply"`
	// DisallowedSource counts decrypted packets whose source address is
	// outside the sending peer's allowed IPs.
	DisallowedSource atomic.Uint64 `counter:"drops/disallowed_source"`
	// BadIPVersion counts decrypted packets that are not IPv4 or IPv6.
	BadIPVersion atomic.Uint64 `counter:"drops/bad_ip_version"`
	// Errors counts the device's error-level events (failed sends,
	// keypair derivation); the logger logs them too.
	Errors atomic.Uint64 `counter:"errors/device"`
}

// counter returns the counter a wireguard-go log format bumps, or nil.
func (s *DeviceStats) counter(format string) *atomic.Uint64 {
	switch format {
	case "Received packet with invalid mac1":
		return &s.InvalidMAC1
	case "Received invalid initiation message from %s":
		return &s.InvalidInitiation
	case "Received invalid response message from %s":
		return &s.InvalidResponse
	case "%v - ConsumeMessageInitiation: handshake replay @ %v":
		return &s.HandshakeReplay
	case "%v - ConsumeMessageInitiation: handshake flood":
		return &s.HandshakeFlood
	case "Sending cookie response for denied handshake message for %v":
		return &s.CookieRepliesSent
	case "Could not decrypt invalid cookie response", "Failed to decode cookie reply":
		return &s.InvalidCookieReply
	case "IPv4 packet with disallowed source address from %v", "IPv6 packet with disallowed source address from %v":
		return &s.DisallowedSource
	case "Packet with invalid IP version from %v":
		return &s.BadIPVersion
	}
	return nil
}

// Logger returns a device.Logger that counts the device's events into s
// and passes them to log (nil: count only): verbose events at debug
// level, errors at error level. Formatting happens only when log is
// enabled for the level, so a counted drop costs no allocation here.
func (s *DeviceStats) Logger(log *slog.Logger) *device.Logger {
	return &device.Logger{
		Verbosef: func(format string, args ...any) {
			if c := s.counter(format); c != nil {
				c.Add(1)
			}
			if log != nil && log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug(fmt.Sprintf(format, args...))
			}
		},
		Errorf: func(format string, args ...any) {
			s.Errors.Add(1)
			if log != nil {
				log.Error(fmt.Sprintf(format, args...))
			}
		},
	}
}
