// Package portmap is the port mapping table that LAN applications fill
// through NAT-PMP (RFC 6886, package portmap/natpmp), PCP (RFC 6887,
// package portmap/pcp) and UPnP IGD (package portmap/upnp): the mappings, the policy
// that decides who may map what, their lifetimes, the server epoch and
// the state file that carries them across a restart. Each mapping is a
// DNAT entry in the NAT engine (natengine.Engine.AddPortMapping), which
// the table installs and removes.
//
// # Policy
//
// The anchor is miniupnpd: secure mode (a host maps only to itself,
// miniupnpd's secure_mode), permission rules in its order (the first rule
// whose inside prefix, internal ports and external ports match decides;
// none matching is a refusal; the default allows 1024-65535 to
// 1024-65535, so ports below 1024 are refused), lifetimes clamped to
// 120 s - 86,400 s (miniupnpd's min_lifetime and max_lifetime), and two
// limits miniupnpd lacks: mappings per inside host and in total, each
// refusal counted in Stats.
//
// # Where it runs
//
// The table answers only what the protocol servers ask; the servers take
// their sockets from the caller, which binds them on LAN-side addresses
// only (never a WAN listener: issue 41, the 81 million UPnP devices that
// answered from the Internet in 2013).
//
// # Wiring (router/portmap.go)
//
// The router runs it from config port_mapping: (off by default), per
// the packages' APIs:
//
//  1. New(Config{Policy, NAT: the *natengine.Engine, WAN: the WAN's
//     natengine.Iface, ExternalAddr: the WAN's first IPv4 address,
//     StateFile: state_dir/portmap.json}), then Restore, then go Run(ctx),
//     once the WAN has an IPv4 address (a DHCP lease), so that restored
//     mappings can be installed. A reload that keeps the policy keeps the
//     table (the engine keeps its port mappings across SetRules); one that
//     changes it builds a new table that Restores from the file, which
//     drops what the new policy forbids.
//  2. NAT-PMP and PCP: a netstack UDP socket bound to each LAN-side
//     interface (stack.Interface.ListenUDP) on each of its IPv4
//     addresses, port 5351, served by pmpd.Server with natpmp.Handler
//     and/or pcp.Handler (Inside: the LAN-side prefixes); the same
//     socket sends pmpd.Server.Announce to pmpd.AnnounceGroup at start
//     and when the WAN address changes.
//  3. UPnP: an SSDP socket on 0.0.0.0:1900 bound to each LAN-side
//     interface and joined to 239.255.255.250 there, served by
//     upnp.Server.ServeSSDP, and upnp.Server.HTTPServer on TCP 5000 of
//     each LAN address (Location names it). Device.UUID is kept in
//     state_dir/portmap/uuid.txt.
//  4. The status page shows Table.Status and the servers' Stats
//     (section port_mapping, metrics gvrouter_portmap_*).
//
// config.PortMapIfaces decides which interfaces are LAN-side: those of
// the inside zones (not WAN-side), each marked permitted or not by
// port_mapping: zones:. A zone that may not map ports (a guest zone) is
// listened on only to be refused: its hosts' requests are answered
// NAT-PMP NotAuthorized (2), PCP NOT_AUTHORIZED (2) and UPnP 606, each
// counted in Stats as refused/zone (Table.RefuseZone, the handlers'
// Refused prefixes), and it gets no SSDP answers. The WAN side gets no
// answer at all: no socket listens there. A config section reads, e.g.:
//
//	port_mapping:
//	  natpmp: on
//	  pcp: on
//	  upnp: off
//	  secure: on
//	  allow: ["1024-65535 192.168.1.0/24 1024-65535"]
//	  max_per_host: 64
//	  max_total: 1024
//	  zones: [lan]
package portmap
