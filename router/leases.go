package router

// portMTULocked is the MTU of an open port, 0 if unknown. r.mu must be
// held.
func (r *Router) portMTULocked(port string) int {
	if rp := r.ports[port]; rp != nil {
		return rp.port.MTU()
	}
	return 0
}
