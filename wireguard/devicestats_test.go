package wireguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deviceFormats are the log formats DeviceStats counts.
var deviceFormats = []string{
	"Received packet with invalid mac1",
	"Received invalid initiation message from %s",
	"Received invalid response message from %s",
	"%v - ConsumeMessageInitiation: handshake replay @ %v",
	"%v - ConsumeMessageInitiation: handshake flood",
	"Sending cookie response for denied handshake message for %v",
	"Could not decrypt invalid cookie response",
	"Failed to decode cookie reply",
	"IPv4 packet with disallowed source address from %v",
	"IPv6 packet with disallowed source address from %v",
	"Packet with invalid IP version from %v",
}

// TestDeviceStatsFormats: every format DeviceStats counts is one the
// pinned wireguard-go's device package logs, so an upgrade that rewords
// one fails here instead of silently stopping a counter. (TestBadInput
// and TestHandshakeFlood see four of them counted from real events.)
func TestDeviceStatsFormats(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.zx2c4.com/wireguard").Output()
	if err != nil {
		t.Fatalf("go list -m golang.zx2c4.com/wireguard: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "device", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no device sources: %v", err)
	}
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	var s DeviceStats
	for _, f := range deviceFormats {
		if !strings.Contains(src.String(), `"`+f+`"`) {
			t.Errorf("wireguard-go's device package does not log %q", f)
		}
		if s.counter(f) == nil {
			t.Errorf("DeviceStats counts no event for %q", f)
		}
	}
	if s.counter("Routine: TUN reader - started") != nil {
		t.Error("DeviceStats counts a routine's start")
	}
}
