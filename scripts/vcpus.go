//go:build ignore

// vcpus measures what the machine's two vCPUs give parallel AES-GCM work
// and how long a cache line takes to cross between them, the two facts
// behind MACsec benchmark (b):
//
//	go run scripts/vcpus.go
//
// It prints the round trip of an atomic ping-pong between two locked
// threads, and the frames per second one process sealing 1514-byte
// frames reaches alone and two such processes reach together (each with
// GOMAXPROCS=1): their ratio is the speedup two vCPUs give with nothing
// shared at all. Then what handing frames between the vCPUs costs, the
// price of sharing one stream's crypto: one thread writes 128 frames of
// 1514 bytes, the other reads every line of them, round after round (the
// writer then rewrites lines the reader holds), against one thread
// doing both.
package main

import (
	"crypto/aes"
	"crypto/cipher"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	seal := flag.Bool("seal", false, "child: seal frames for -d and print frames/s")
	enc := flag.Bool("enc", false, "encrypt (else integrity-only)")
	d := flag.Duration("d", 2*time.Second, "how long each measurement runs")
	flag.Parse()
	if *seal {
		fmt.Println(sealRate(*enc, *d))
		return
	}
	fmt.Printf("atomic ping-pong round trip between two threads: %.0f ns\n", pingPong())
	for _, e := range []bool{false, true} {
		one := children(1, e, *d)
		two := children(2, e, *d)
		fmt.Printf("1514-byte seal, encrypt=%v: one process %.0f frames/s, two %.0f: %.2fx\n", e, one, two, two/one)
	}
	lw, lr := handoff(false)
	rw, rr := handoff(true)
	fmt.Printf("1514-byte frame handoff, ns per frame: one thread writes %.0f, reads %.0f; across two, writing frames the other read %.0f, the other reading them %.0f\n", lw, lr, rw, rr)
}

// handoff returns the ns per frame of writing 128 frames of 1514 bytes
// and of then reading one word of every cache line of them, averaged
// over many rounds; with remote, the reads run on a second locked thread
// between the writer's rounds.
func handoff(remote bool) (write, read float64) {
	runtime.GOMAXPROCS(2)
	const size, nFrames, rounds = 1514, 128, 20000
	frames := make([][]byte, nFrames)
	for i := range frames {
		frames[i] = make([]byte, size)
	}
	src := make([]byte, size)
	var sink uint64
	readAll := func() time.Duration {
		t0 := time.Now()
		for _, f := range frames {
			for i := 0; i < size; i += 64 {
				sink += uint64(f[i])
			}
		}
		return time.Since(t0)
	}
	var round, done atomic.Int64
	var readNs atomic.Int64
	if remote {
		go func() {
			runtime.LockOSThread()
			for r := int64(1); r <= rounds; r++ {
				for round.Load() != r {
				}
				readNs.Add(int64(readAll()))
				done.Store(r)
			}
		}()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var writeNs int64
	for r := int64(1); r <= rounds; r++ {
		t0 := time.Now()
		for _, f := range frames {
			copy(f, src)
		}
		writeNs += int64(time.Since(t0))
		if remote {
			round.Store(r)
			for done.Load() != r {
			}
		} else {
			readNs.Add(int64(readAll()))
		}
	}
	_ = sink
	per := float64(rounds * nFrames)
	return float64(writeNs) / per, float64(readNs.Load()) / per
}

// pingPong returns the mean round trip of a value bounced between two
// OS threads through one atomic word.
func pingPong() float64 {
	runtime.GOMAXPROCS(2)
	var word atomic.Int64
	const n = 1_000_000
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for i := int64(1); i < 2*n; i += 2 {
			for word.Load() != i {
			}
			word.Store(i + 1)
		}
		close(done)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	for i := int64(0); i < 2*n; i += 2 {
		for word.Load() != i {
		}
		word.Store(i + 1)
	}
	<-done
	return float64(time.Since(t0).Nanoseconds()) / n
}

// children runs k sealing processes at once and returns their summed
// frames per second.
func children(k int, enc bool, d time.Duration) float64 {
	cmds := make([]*exec.Cmd, k)
	outs := make([]strings.Builder, k)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-seal", "-enc="+strconv.FormatBool(enc), "-d="+d.String())
		cmds[i].Stdout = &outs[i]
		cmds[i].Env = append(os.Environ(), "GOMAXPROCS=1")
		if err := cmds[i].Start(); err != nil {
			panic(err)
		}
	}
	sum := 0.0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			panic(err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(outs[i].String()), 64)
		if err != nil {
			panic(err)
		}
		sum += v
	}
	return sum
}

// sealRate seals 2,048 frames of 1514 bytes round after round for d and
// returns frames per second.
func sealRate(enc bool, d time.Duration) float64 {
	blk, _ := aes.NewCipher(make([]byte, 16))
	g, _ := cipher.NewGCM(blk)
	const size, hdr = 1514, 28
	frames := make([][]byte, 2048)
	for i := range frames {
		frames[i] = make([]byte, size+16)
	}
	var iv [12]byte
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		for _, f := range frames {
			if enc {
				g.Seal(f[hdr:hdr], iv[:], f[hdr:size], f[:hdr])
			} else {
				g.Seal(f[size:size], iv[:], nil, f[:size])
			}
			n++
		}
	}
	return float64(n) / time.Since(t0).Seconds()
}
