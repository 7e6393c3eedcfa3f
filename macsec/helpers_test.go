package macsec

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// sink collects copies of delivered frames.
type sink struct {
	mu     sync.Mutex
	frames [][]byte
}

func (k *sink) handler(frames [][]byte) {
	k.mu.Lock()
	for _, f := range frames {
		k.frames = append(k.frames, append([]byte(nil), f...))
	}
	k.mu.Unlock()
}

func (k *sink) get() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([][]byte(nil), k.frames...)
}

// goroutineLeakCheck fails the test if goroutines started during it are
// still running at cleanup (wireguard-go device_test.go).
func goroutineLeakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("goroutine leak: %d before, %d after\n%s", before, n, buf)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// vector is one case of testdata/ieee8021ae-annexC.json.
type vector struct {
	Name           string `json:"name"`
	Suite          string `json:"suite"`
	Key            string `json:"key"`
	SCI            string `json:"sci"`
	SCIInFrame     bool   `json:"sci_in_frame"`
	TCIAN          string `json:"tci_an"`
	AN             uint8  `json:"an"`
	ShortLength    int    `json:"short_length"`
	PNHex          string `json:"pn_hex"`
	Confidential   bool   `json:"confidentiality"`
	ICVLen         int    `json:"icv_len"`
	IV             string `json:"iv"`
	PlaintextFrame string `json:"plaintext_frame"`
	ProtectedFrame string `json:"protected_frame"`
	SSCI           string `json:"ssci"`
	Salt           string `json:"salt"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/ieee8021ae-annexC.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []vector `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Cases
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

func (v *vector) suite(t testing.TB) CipherSuite {
	c, err := ParseCipherSuite(map[string]string{
		"GCM-AES-128": "gcm-aes-128", "GCM-AES-256": "gcm-aes-256",
		"GCM-AES-XPN-128": "gcm-aes-xpn-128", "GCM-AES-XPN-256": "gcm-aes-xpn-256",
	}[v.Suite])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (v *vector) sci(t testing.TB) SCI {
	u, err := strconv.ParseUint(v.SCI, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return SCI(u)
}

func (v *vector) sa(t testing.TB) SAConfig {
	pn, err := strconv.ParseUint(v.PNHex, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	c := SAConfig{AN: v.AN, PN: pn, Key: NewKey(mustHex(t, v.Key)), KeyID: []byte{1}}
	if v.SSCI != "" {
		ssci, err := strconv.ParseUint(v.SSCI, 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		c.SSCI = uint32(ssci)
		c.Salt = [12]byte(mustHex(t, v.Salt))
	}
	return c
}

// testConfig returns a Linux-default Config with the given suite,
// encryption and handlers.
// testWorkers is the Config.Workers of testConfig; bothModes sets it.
var testWorkers = 0

// bothModes runs f with the pipeline (runtime.NumCPU() workers, at least
// 2) and inline (one worker, where callers do everything themselves):
// the two paths must count and deliver alike.
func bothModes(t *testing.T, f func(t *testing.T)) {
	for _, w := range []int{max(2, runtime.NumCPU()), 1} {
		t.Run(fmt.Sprintf("workers=%d", w), func(t *testing.T) {
			testWorkers = w
			defer func() { testWorkers = 0 }()
			f(t)
		})
	}
}

func testConfig(cs CipherSuite, encrypt bool, tx, rx Handler) Config {
	cfg := DefaultConfig(0x0200000000010001)
	cfg.Workers = testWorkers
	cfg.AlwaysParallel = true // tests exercise the helpers whatever this machine's wakeups cost
	cfg.Cipher = cs
	cfg.Encrypt = encrypt
	cfg.TX, cfg.RX = tx, rx
	return cfg
}

func testKey(cs CipherSuite) Key {
	b := make([]byte, cs.KeyLen())
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return NewKey(b)
}

var allSuites = []CipherSuite{GCMAES128, GCMAES256, GCMAESXPN128, GCMAESXPN256}

// testFrame returns an Ethernet frame of n octets whose payload starts with
// seq.
func testFrame(n int, seq uint32) []byte {
	f := make([]byte, n)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00})
	for i := 14; i < n; i++ {
		f[i] = byte(i)
	}
	if n >= 18 {
		f[14], f[15], f[16], f[17] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	}
	return f
}
