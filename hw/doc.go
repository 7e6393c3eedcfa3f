// Package hw owns the router's physical ports: an AF_PACKET socket per
// receive queue with a TPACKET_V3 ring, batched transmit with sendmmsg, the
// BPF filter that hides the kernel's own outgoing frames, the kernel
// features and silence the router needs on a port (GRO/LRO off, no
// addresses, IPv6 off, an ingress drop), and the hardware profiles.
//
// # Batches
//
// A port delivers frames in batches, one ring block at a time. A Frame's
// Data points into ring memory and stays valid only until the handler
// returns; a consumer that keeps a frame must copy it. Frames may be sent
// straight from ring memory with WriteFrames while the handler runs.
package hw
