// Package lab builds a virtual test network in Linux network namespaces and
// runs the router in it: cmd/gvlab is its binary, and the router it runs
// is a cmd/gvrouter process, as on a board.
//
// # Topology
//
// Each run owns three namespaces named after its prefix, "gvl<pid>" (the
// lab process's PID): gvl<pid>-lan (the LAN host), gvl<pid>-rtr (the router)
// and gvl<pid>-wan (the WAN host). A process that runs several labs at once
// (the package's tests) tags each, gvl<pid>t<n>. Two veth pairs join them:
//
//	LAN host eth0 10.77.1.2/24 fd77:1::2/64
//	    ⇅ veth
//	router lan0 ── gvrouter: lan 10.77.1.1/24 fd77:1::1/64
//	router wan0 ── gvrouter: wan 10.77.2.1/24 fd77:2::1/64
//	    ⇅ veth
//	WAN host eth0 10.77.2.2/24 fd77:2::2/64
//
// The veths are created inside the namespaces, so the machine's own
// namespace never sees them. The hosts' TSO, GSO, GRO and TX checksum
// offloads are off so that they send wire-like frames (an AF_PACKET reader
// would otherwise get 64 KiB super-frames and half-done checksums), and the
// router ports get the same settings so that kernel and router figures are
// comparable. The router namespace keeps net.ipv4.ip_forward=0, IPv6 off
// and no kernel addresses on lan0 and wan0: every packet that crosses it
// crosses gvrouter.
//
// # Ownership and cleanup
//
// A run keeps its lab config, the router's log and an owner file (PID and
// process start time) in /run/gvrouter-lab/gvl<pid>. Before building, a run
// removes the namespaces and directories of earlier runs whose owner
// process is gone (a crash, SIGKILL); namespaces with other prefixes or a
// live owner are never touched. Child processes (router, iperf3) get
// SIGKILL when the lab process dies (PR_SET_PDEATHSIG) and are otherwise
// stopped by PID. A run removes everything it built when it returns, on
// error and on SIGINT too, unless Options.Keep asked to keep the lab up
// (then until SIGINT).
//
// # Proofs
//
// Run proves that ping (IPv4, IPv6) and TCP (both ways, both families)
// cross the router, that the status page answers at http://10.77.1.1/ from
// the LAN host and at 127.0.0.1:PORT in the machine's own namespace (a
// proxy in the lab process dials 10.77.1.1:80 from a socket made in the LAN
// host's namespace), that the router's interface counters rose, and that
// the kernel in the router namespace forwarded nothing.
//
// # Bench
//
// With Options.Bench, Run measures with iperf3 (fixed settings: -t 10 -O 2,
// one stream and -P 4, both directions, median of 5 runs):
//
//	(a) the router forwarding LAN↔WAN;
//	(b) the kernel forwarding on the same veths in the same namespace;
//	(c) `gvrouter bridge -a lan0 -b wan0`: the hw port code bridging at layer 2;
//	(d) the kernel bridge on the same veths (no STP, no br_netfilter hooks);
//
// and prints (a)/(b) and (c)/(d) for each case.
package lab
