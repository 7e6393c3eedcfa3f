package natengine

// TCPState is a conntrack TCP state (Linux nf_conntrack_proto_tcp names).
type TCPState uint8

// TCP conntrack states.
const (
	TCPNone        TCPState = iota // no packet seen (never stored)
	TCPSynSent                     // SYN seen in the original direction
	TCPSynSent2                    // SYN seen in both directions: simultaneous open (RFC 5382 REQ-2)
	TCPSynRecv                     // SYN-ACK seen
	TCPEstablished                 // handshake completed (or picked up mid-stream)
	TCPFinWait                     // FIN seen in one direction
	TCPCloseWait                   // that FIN was acknowledged
	TCPLastAck                     // FIN seen in both directions
	TCPTimeWait                    // last FIN acknowledged
	TCPClose                       // RST seen
	numTCPStates
)

var tcpStateNames = [numTCPStates]string{
	"NONE", "SYN_SENT", "SYN_SENT2", "SYN_RECV", "ESTABLISHED", "FIN_WAIT",
	"CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE",
}

// String returns the state's conntrack -L name.
func (s TCPState) String() string {
	if s < numTCPStates {
		return tcpStateNames[s]
	}
	return "UNKNOWN"
}

// tcpTrack is the per-flow TCP tracking state. There is no window tracking
// (Linux td_end/td_maxwin): sequence numbers are not checked.
type tcpTrack struct {
	state TCPState
	fin   [2]bool // a FIN was seen from direction d
}

// open sets the state for the first packet of a flow. ok is false if the
// packet cannot open a flow: a lone RST, FIN or SYN-ACK. A plain ACK picks
// the flow up mid-stream (Linux tcp_loose=1), e.g. after a router restart.
func (t *tcpTrack) open(flags uint8) bool {
	switch {
	case flags&(tcpRST|tcpFIN) != 0:
		return false
	case flags&(tcpSYN|tcpACK) == tcpSYN:
		t.state = TCPSynSent
	case flags&tcpSYN != 0:
		return false
	case flags&tcpACK != 0:
		t.state = TCPEstablished
	default:
		return false
	}
	return true
}

// update advances the state for a packet from direction dir (0 original,
// 1 reply) and reports whether the handshake just completed.
func (t *tcpTrack) update(dir int, flags uint8) (established bool) {
	switch {
	case flags&tcpRST != 0:
		t.state = TCPClose
	case flags&(tcpSYN|tcpACK) == tcpSYN:
		switch {
		case dir == 0 && (t.state == TCPNone || t.state == TCPTimeWait || t.state == TCPClose):
			*t = tcpTrack{state: TCPSynSent} // a new connection reuses the tuple
		case dir == 1 && t.state == TCPSynSent:
			t.state = TCPSynSent2
		}
	case flags&tcpSYN != 0: // SYN-ACK
		if (dir == 1 && t.state == TCPSynSent) || t.state == TCPSynSent2 {
			t.state = TCPSynRecv
		}
	case flags&tcpFIN != 0:
		t.fin[dir] = true
		switch t.state {
		case TCPSynRecv, TCPEstablished:
			t.state = TCPFinWait
		case TCPFinWait, TCPCloseWait:
			if t.fin[1-dir] {
				t.state = TCPLastAck
			}
		}
	case flags&tcpACK != 0:
		switch t.state {
		case TCPSynRecv:
			t.state = TCPEstablished
			return true
		case TCPFinWait:
			if t.fin[1-dir] && !t.fin[dir] {
				t.state = TCPCloseWait
			}
		case TCPLastAck:
			t.state = TCPTimeWait
		}
	}
	return false
}
