package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gvrouter/gvrouter/wireguard"
)

// cmdWG runs `gvrouter wg genkey` (a new private key) and `gvrouter wg
// pubkey` (the public key of the private key on stdin), wg(8)'s two key
// commands with its base64 text, so `gvrouter wg genkey | gvrouter wg
// pubkey` and wg's agree.
func cmdWG(args []string, in io.Reader, out io.Writer) error {
	if len(args) >= 1 && args[0] == "peer" {
		return cmdWGPeer(args[1:], out)
	}
	if len(args) != 1 {
		return errors.New("usage: gvrouter wg genkey | gvrouter wg pubkey; gvrouter wg peer [flags] NAME")
	}
	switch args[0] {
	case "genkey":
		k, err := wireguard.GenerateKey()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, k)
		return err
	case "pubkey":
		b, err := io.ReadAll(io.LimitReader(in, 1024))
		if err != nil {
			return err
		}
		defer clear(b)
		k, err := wireguard.ParseKey(string(b))
		if err != nil {
			return fmt.Errorf("pubkey: stdin: %w", err)
		}
		_, err = fmt.Fprintln(out, k.PublicKey())
		return err
	}
	return fmt.Errorf("unknown wg command %q (genkey, pubkey, peer)", args[0])
}
