// Package qdisc is smart queue management for the router's WAN interfaces:
// CoDel (RFC 8289), FQ-CoDel (RFC 8290) with per-host fairness as cake's
// dual-srchost/dual-dsthost modes, optional DSCP tins (cake's diffserv3), and
// a rate shaper with link-layer overhead compensation.
//
// The package knows frames as byte slices and time as monotonic nanoseconds
// passed in by the caller; it imports nothing of the router, the stack or the
// hardware ports, so it is tested with fake clocks alone.
//
// # Data path
//
// One goroutine owns an FQCoDel and its Shaper (the interface's transmit loop):
//
//  1. FQCoDel.Enqueue (fqcodel.go): classify each frame (Config.Classify,
//     by default ClassifyFrame in classify.go), pick its tin by DSCP
//     (tins.go), copy it into a pool slot with its enqueue time, append it to
//     its flow queue; a new flow joins its host's new-flow list and a new
//     host its tin's new-host list. A full pool drops from the fattest flow.
//  2. Shaper.Dequeue (shaper.go): while the virtual clock allows, pick a tin
//     (FQCoDel.pickTin), a host by DRR (dequeueTin), a flow of that host by
//     DRR (dequeueHost), and let that flow's CoDel drop, mark or deliver its
//     head packet (codelDequeue, codel.go). FQCoDel.Dequeue is the same
//     without the clock.
//
// # Memory bound
//
// New allocates everything: Limit slots of FrameSize bytes (default 4096 x
// 1600 = 6.25 MiB) plus the flow and host tables (1024 each per tin). No
// traffic pattern grows it: a flood of tiny packets fills the slots and then
// drops from the fattest flow; a sender that opens 10,000 flows shares the
// 1024 flow queues of its tin and, keyed by its host, one host's share.
package qdisc
