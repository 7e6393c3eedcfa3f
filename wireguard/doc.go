// Package wireguard runs WireGuard interfaces inside the router's
// netstack with golang.zx2c4.com/wireguard's device package, the
// reference userspace implementation (Tailscale runs it over gVisor the
// same way). The kernel never sees the traffic: the encrypted side is a
// conn.Bind (Bind) over UDP sockets the caller opens in its WAN netstack,
// and the clear side is a tun.Device (TUN) that is also a point-to-point
// stack.LinkEndpoint the router adds as a NIC.
//
// Data path, in processing order:
//
//	netstack NIC -> TUN.WritePackets (tun.go): queue, one reference each;
//	          a full queue parks the router's own packets (up to
//	          maxPark) and drops forwarded ones (TestTUNBackPressure);
//	          the router's fast path queues the packets of offloaded
//	          flows with TUN.WriteFast (inside/fast_path_to_tunnel),
//	          past netstack and the Out hook (TestWriteFast)
//	device reader -> TUN.Read (tun.go): copy out a batch, release
//	device encrypts -> Bind.Send (bind.go): the batch in one call to a
//	          BatchWriter (the router's socket: one write on the WAN port)
//	socket -> Bind receive function (bind.go): a batch per call from a
//	          BatchReader (the datagrams queued on the socket), classify,
//	          count, drop junk, count unknown receiver indices (index.go),
//	          drop the handshakes of a source the device just sent a
//	          cookie reply and that keeps sending (flood.go), cached
//	          Endpoint per source
//	device decrypts -> TUN.Write (tun.go): the Hooks' Forward (the
//	          router's fast path, stack.LinkFastPath) sends the packets of
//	          offloaded flows straight out of their egress port
//	          (inside/fast_path); the rest are copied into netstack,
//	          all inside one Batcher bracket (what netstack forwards out
//	          of it leaves each port in one write)
//
// None of these allocates per packet (TestAllocs, TestBindReceiveBatch,
// TestBatchedWrites; netstack's own UDP send and receive do, see
// docs/performance.md). What the device
// rejects it reports through its Logger; DeviceStats.Logger counts those
// events by reason. Keys are wg(8)'s base64 (keys.go, ReadKeyFile for
// 0600 key files); Config renders the device's UAPI text, ReadStatus
// reads it back as a JSON-tagged Status (per peer: last handshake and
// its age, endpoint, rx/tx bytes, allowed IPs; the counters by group).
//
// The router runs it (issue 40 stage 2): router/wglink runs one device
// per wireguard: interface, router/wireguard.go adds its TUN to the
// netstack as a link (stack.LinkConfig) with the NAT engine on its
// inside (Hooks), the Bind on the router's own netstack UDP socket, the
// listen port admitted by the WAN input policy and reserved from SNAT;
// reloads change peers with Config.UpdateUAPI, so the others keep their
// sessions. `gvrouter wg peer NAME` prints a ClientConfig for a new peer
// (FreeAddress picks its address) and its QR code. Tested here: a
// handshake flood gets cookie replies, then the Bind keeps its source
// out of the device's handshake queue, and another peer still
// completes its handshake, in bounded memory (TestHandshakeFlood,
// TestHandshakeFloodOtherPeer, TestBindDropsHandshakeFlood); a flood
// from many source addresses still reaches the device, whose cookie
// replies are then what protects it; random UDP,
// replays and unknown receiver indices are counted (TestBadInput); the
// Bind runs on the router's netstack sockets (TestTunnelOverNetstack); a
// moved endpoint host is found again (TestReresolve); an update keeps
// live sessions (TestUpdateKeepsSessions). Against Linux's kernel
// WireGuard: lab's TestWireGuardAgainstLinux.
package wireguard
