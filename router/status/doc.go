// Package status serves the router's read-only status page.
//
// A [Server] samples a [Source] once a second, derives current rates (bits
// and packets per second) for every interface and port from the last two
// samples, and keeps the rates of the last [HistoryLen] samples (15
// minutes) in a fixed ring in memory. It serves four views of the same data:
//
//   - "/": an HTML page (html/template, inline CSS, one inline script,
//     page.js, that fetches /api/status every second and redraws the page
//     in place, with graphs drawn as inline SVG; without JavaScript the
//     page reloads itself every 2 s);
//   - "/api/status": the [Snapshot] as JSON, with seq, rates,
//     uptime_seconds and the process's CPU and memory;
//   - "/api/history?since=SEQ": the rates of the samples after SEQ (all of
//     the ring without it), so a freshly opened page draws the past;
//   - "/metrics": Prometheus exposition from a private registry whose
//     collector reads the latest sample at scrape time.
//
// The templates and page.js render the same markup: the first paint comes
// from the templates, and the script's updates change only what changed.
// TestBrowser (headless chromium) checks that the two agree.
//
// Only GET and HEAD are allowed. The page never shows a secret: a Snapshot
// carries names, states, addresses and counters only, in every section
// (VLAN, GRO, MACsec and MKA, conntrack, the DHCP, DNS and IPv6 services),
// and a new section must keep it that way.
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
