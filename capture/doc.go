// Package capture copies the frames that cross a port or an interface of
// the router into pcapng files, for Wireshark and tshark.
//
// # Points
//
// A Point is one place frames can be watched: a port (the frames as on
// the wire, 802.1Q tags in-band, SecTAG frames as sent and received) or
// an interface (a VLAN interface's frames untagged, a SecY's plaintext).
// The data path calls CaptureRx and CaptureTx once per batch; with no
// capture running each call costs one atomic load, and interfaces and a
// port's receive entry do not even hold a Point then
// (stack.Interface.SetCapture, stack.PortInput.SetCapture).
//
// # Sessions
//
// A running capture is a session: a filter, a snap length, a count and a
// time limit, and a bounded queue of preallocated buffers. The data path
// copies a matching frame into a free buffer and queues it; with no free
// buffer the frame is counted as dropped by the capture, never waited
// for. One goroutine per session writes the queue as pcapng (gopacket's
// pcapgo, pure Go). At most MaxSessions run at once.
//
// # Control
//
// Server serves captures on a Unix socket (mode 0660) to root and the
// daemon's group only, checked per connection with SO_PEERCRED; Dial is
// its client, used by `gvrouter capture`. HTTPHandler serves the same on
// the status page where the caller allows it.
package capture
