// Package portmap is the port mapping table that LAN applications fill
// through NAT-PMP (RFC 6886, package portmap/natpmp), PCP (RFC 6887,
// package portmap/pcp) and, later, UPnP IGD: the mappings, the policy
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
package portmap
