// Package sqm runs the qdisc package's shaper on a WAN interface: one Queue
// per shaped direction, each an FQ-CoDel (per-host fair, package qdisc)
// behind a rate shaper, drained by its own goroutine that sleeps until the
// shaper lets the next packet go. On Linux that goroutine has a thread of
// its own at a raised priority and sleeps in the kernel (ppoll with the
// deadline as timeout, sleep_linux.go), so a busy machine wakes it on time
// as cake's hrtimer would be.
//
// Upload: the stack hands every frame leaving the WAN interface (fast path,
// netstack, the router's own) to the Queue as the interface's
// hw.FrameWriter; the Queue copies it into its pool and returns, and its
// goroutine writes what the shaper releases to the port's writer.
//
// Download: frames arriving on the WAN interface go into an ingress-mode
// Queue (cake's ingress keyword: what CoDel drops counts as received)
// before the stack looks at them; its goroutine hands what the shaper
// releases back to the interface's receive path.
//
// Per-host fairness keys by the inside address before NAT (cake's
// dual-srchost on upload, dual-dsthost on download). The Queue sees frames
// NATed (upload: the source is the WAN address) or not yet de-NATed
// (download: the destination is the WAN address), so it asks conntrack
// (HostFunc, natengine.Engine.InsideHost) for the flow's inside address;
// untracked packets are keyed by the address the header shows.
package sqm
