// Package status serves the router's read-only status page.
//
// A [Server] samples a [Source] once a second, keeps the last two samples and
// derives current rates (bits and packets per second) for every interface and
// port from them. It serves three views of the same data:
//
//   - "/": an HTML page (html/template, inline CSS, refreshes itself every 2 s);
//   - "/api/status": the [Snapshot] as JSON, with rates and uptime_seconds;
//   - "/metrics": Prometheus exposition from a private registry whose
//     collector reads the latest sample at scrape time.
//
// Only GET and HEAD are allowed. The page never shows a secret: a Snapshot
// carries names, states, addresses and counters only, and later sections
// (VLAN, GRO, MACsec, conntrack, the DHCP and DNS services) must keep it
// that way.
//
// # Listeners
//
// The router serves the page on its own netstack (a gonet listener on a LAN
// address) and optionally on a host management address; [Server.Serve] takes
// any net.Listener, so the package does not care which.
//
// # Adding sections
//
// New sections are added to [Snapshot] as optional fields with omitempty JSON
// tags (a slice of a new struct, or a pointer to one), so older clients and
// Sources that do not fill them keep working.
package status
