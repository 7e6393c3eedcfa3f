package learned

import "sync"

// Queue carries what the clients learn (DHCPv4 leases, RAs, the DHCPv6
// delegation) from their goroutines to the runtime, which applies it
// under its lock. Only the newest change per service is kept: a client
// may report several before one is applied, and only its present state
// matters. Posting never blocks, so a client can always be stopped.
type Queue struct {
	mu      sync.Mutex
	pending map[string]Change
	// Kick has a value when changes are pending.
	Kick chan struct{}
}

// Change is one client's new state; Owner identifies the client (the
// runtime's handle on the service), so that a change from a client a
// reload has replaced is ignored. The queue's key is the service's name;
// Iface is its interface. One of Lease, RA and PD is the news, by the
// service's kind.
type Change struct {
	Owner any
	Iface string
	Lease *Lease      // DHCPv4 client: nil = no lease
	RA    *RA         // RA learner: nil = no router, no prefix
	PD    *Delegation // DHCPv6 client: nil = no delegation
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{pending: make(map[string]Change), Kick: make(chan struct{}, 1)}
}

// Post records the new state of the service named name.
func (q *Queue) Post(name string, c Change) {
	q.mu.Lock()
	q.pending[name] = c
	q.mu.Unlock()
	select {
	case q.Kick <- struct{}{}:
	default:
	}
}

// Take returns and clears the pending changes.
func (q *Queue) Take() map[string]Change {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending
	q.pending = make(map[string]Change)
	return p
}
