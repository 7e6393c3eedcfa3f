//go:build labmka

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"

	"github.com/gvrouter/gvrouter/router"
)

// LabMKASeedEnv names the environment variable that, in a build with
// -tags labmka and never otherwise, makes the MKA participants draw MIs
// and SAKs from a known stream, so the lab's key-leak test can grep every
// output for the SAKs: 64 hex digits. The stream is ChaCha8 keyed by
// SHA-256(seed || decimal pid), so each router process of a lab run
// draws its own MIs.
const LabMKASeedEnv = "GVROUTER_LAB_MKA_SEED"

func init() {
	labOptions = append(labOptions, func() []router.Option {
		seed, err := hex.DecodeString(os.Getenv(LabMKASeedEnv))
		if err != nil || len(seed) != 32 {
			return nil
		}
		return []router.Option{router.WithMKARand(&lockedReader{r: LabMKAStream(seed, os.Getpid())})}
	})
}

// lockedReader serialises the participants' reads (ChaCha8 is not safe
// for concurrent use; each SecY's participant reads on its own).
type lockedReader struct {
	mu sync.Mutex
	r  *rand.ChaCha8
}

func (l *lockedReader) Read(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(b)
}

// LabMKAStream returns the stream of a process pid for seed.
func LabMKAStream(seed []byte, pid int) *rand.ChaCha8 {
	return rand.NewChaCha8(sha256.Sum256(append(append([]byte(nil), seed...), strconv.Itoa(pid)...)))
}
