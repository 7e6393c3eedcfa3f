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
//	netstack NIC -> TUN.WritePackets (tun.go): queue, one reference each
//	device reader -> TUN.Read (tun.go): copy out, release
//	device encrypts -> Bind.Send (bind.go): one datagram per buffer
//	socket -> Bind receive function (bind.go): classify, count, drop junk,
//	          count unknown receiver indices (index.go), cached Endpoint
//	          per source
//	device decrypts -> TUN.Write (tun.go): copy into netstack
//
// None of these allocates per packet (TestAllocs). What the device
// rejects it reports through its Logger; DeviceStats.Logger counts those
// events by reason. Keys are wg(8)'s base64 (keys.go, ReadKeyFile for
// 0600 key files); Config renders the device's UAPI text, ReadStatus
// reads it back as a JSON-tagged Status (per peer: last handshake and
// its age, endpoint, rx/tx bytes, allowed IPs; the counters by group).
//
// This is the first stage of issue 40. Done: the Bind, the TUN, keys and
// key files, Config with Validate and UAPI, the counters, Status, the
// wg-quick text of a new peer (ClientConfig), Reresolve (endpoint host
// names looked up again when a peer stops answering), `gvrouter wg
// genkey|pubkey`, and the config block (router/config, refused as not
// yet running). The next stage wires it: a router NIC per interface
// with a firewall role/zone, routes from allowed IPs, the Bind over the
// WAN netstack's *stack.UDPConn (with the NAT engine reserving the
// port), a timer calling Reresolve for peers at host names, `gvrouter wg
// peer NAME` printing a ClientConfig and its QR code, Status on the
// status page and /metrics, and interop with Linux WireGuard in the
// linuxpeer QEMU guest. Tested here already: a handshake flood gets
// cookie replies (TestHandshakeFlood); random UDP, replays and unknown
// receiver indices are counted (TestBadInput); the Bind runs on the
// router's netstack sockets (TestTunnelOverNetstack); a moved endpoint
// host is found again (TestReresolve).
package wireguard
