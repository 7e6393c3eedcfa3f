package config

import "slices"

// Equal reports whether p and q configure the same port; positions are
// ignored, so moving a port within the file changes nothing.
func (p Port) Equal(q Port) bool {
	return p.Name == q.Name && p.Queues == q.Queues && p.MTU == q.MTU && p.Driver == q.Driver && p.Tx == q.Tx && p.AQM == q.AQM && p.Kind == q.Kind
}

// Equal reports whether i and j configure the same interface; positions
// are ignored.
func (i Interface) Equal(j Interface) bool {
	return i.Name == j.Name && i.Port == j.Port && i.MTU == j.MTU && i.Role == j.Role &&
		slices.Equal(i.Addresses, j.Addresses) && slices.Equal(i.VLAN, j.VLAN) &&
		i.VLANProtocol == j.VLANProtocol && i.PCP == j.PCP && i.GRO == j.GRO &&
		(i.DHCP == nil) == (j.DHCP == nil) && i.PPPoE.Equal(j.PPPoE) && i.Host == j.Host && i.SQM.equal(j.SQM) &&
		i.WireGuard.equal(j.WireGuard)
}

// Equal reports whether r and s are the same route; positions are ignored.
func (r Route) Equal(s Route) bool {
	return r.To == s.To && r.Via == s.Via && r.Dev == s.Dev
}

// Equal reports whether l and m listen on the same address; positions are
// ignored.
func (l Listen) Equal(m Listen) bool {
	return l.Interface == m.Interface && l.Host == m.Host && l.Port == m.Port
}
