// Command armchacha seals and opens N full-size WireGuard packets (1420
// bytes of inner packet, the tunnel MTU) with ChaCha20-Poly1305 as
// wireguard-go does (golang.org/x/crypto/chacha20poly1305, a 12-byte
// nonce holding the packet counter, no additional data), for
// scripts/armproj.sh BENCH=chacha: the trace counts the 32-bit ARM
// instructions of each Seal call from main.seal and each Open call from
// main.open. Go has no 32-bit ARM assembly for either half of the AEAD,
// so this is the pure-Go cipher a board would run.
//
//	CGO_ENABLED=0 GOARCH=arm GOARM=7 go build -o armchacha ./scripts/armchacha
//	qemu-arm-static -one-insn-per-tb -d nochain,exec -D /dev/stdout ./armchacha 20
package main

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/crypto/chacha20poly1305"
)

// packetSize is a full-size inner packet at wg-quick's MTU of 1420.
const packetSize = 1420

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: armchacha N (seals and opens N packets of 1420 bytes)")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "armchacha: N must be a positive number, not %q\n", os.Args[1])
		os.Exit(2)
	}
	var key [chacha20poly1305.KeySize]byte
	for i := range key {
		key[i] = byte(i)
	}
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "armchacha:", err)
		os.Exit(1)
	}
	plain := bytes.Repeat([]byte{0x45}, packetSize)
	sealed := make([]byte, 0, packetSize+chacha20poly1305.Overhead)
	opened := make([]byte, 0, packetSize)
	var nonce [chacha20poly1305.NonceSize]byte
	for i := range n {
		binary.LittleEndian.PutUint64(nonce[4:], uint64(i))
		sealed = seal(aead, sealed[:0], nonce[:], plain)
		opened, err = open(aead, opened[:0], nonce[:], sealed)
		if err != nil || !bytes.Equal(opened, plain) {
			fmt.Fprintf(os.Stderr, "armchacha: packet %d did not open: %v\n", i, err)
			os.Exit(1)
		}
	}
	fmt.Printf("sealed and opened %d packets of %d bytes\n", n, packetSize)
}

// seal and open are the windows the trace counts: each is one call of
// the AEAD's method.
//
//go:noinline
func seal(a cipher.AEAD, dst, nonce, p []byte) []byte { return a.Seal(dst, nonce, p, nil) }

//go:noinline
func open(a cipher.AEAD, dst, nonce, p []byte) ([]byte, error) { return a.Open(dst, nonce, p, nil) }
