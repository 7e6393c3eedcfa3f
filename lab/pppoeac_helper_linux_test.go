package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/gvrouter/gvrouter/internal/pppoeac"
)

// pppoeACEnv configures the pppoeac helper (GVL_LAB_HELPER=pppoeac):
// "IFACE,TUN,LOCAL,PEER,MODE" with MODE pppoe or plain.
const pppoeACEnv = "GVL_PPPOEAC"

// pppoeACHelper runs the user-space access concentrator of package
// pppoeac in its own process (the bench measures the router's process
// CPU apart from it): it prints "ready" once its sockets are open and
// relays until killed.
func pppoeACHelper() error {
	f := strings.Split(os.Getenv(pppoeACEnv), ",")
	if len(f) != 5 {
		return fmt.Errorf("%s=%q: want IFACE,TUN,LOCAL,PEER,MODE", pppoeACEnv, os.Getenv(pppoeACEnv))
	}
	local, err := netip.ParseAddr(f[2])
	if err != nil {
		return err
	}
	peer, err := netip.ParseAddr(f[3])
	if err != nil {
		return err
	}
	ac, err := pppoeac.Open(pppoeac.Config{Iface: f[0], Tun: f[1], Local: local, Peer: peer, Plain: f[4] == "plain"})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return ac.Run(context.Background())
}
