package status

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"time"
)

// pageRefresh is how often the page reloads itself when the browser runs
// no JavaScript: two sample intervals, so every reload shows a new sample.
// With JavaScript the page fetches /api/status every second instead
// (page.js) and never reloads.
const pageRefresh = "2"

// pageJS is the page's script: it redraws the sections from /api/status
// and the graphs from /api/history. It renders the same markup as the
// templates below, so its first update changes no text on the page.
//
//go:embed page.js
var pageJS string

// pageCSP is the page's Content-Security-Policy: inline CSS, pageJS alone
// by its hash (an injected script cannot run even if escaping failed),
// fetches to this server only.
var pageCSP = func() string {
	h := sha256.Sum256([]byte(pageJS))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(h[:]) +
		"'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
}()

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes":       formatBytes,
	"bits":        formatBits,
	"pps":         formatPPS,
	"count":       formatCount,
	"uptime":      formatUptime,
	"state":       stateClass,
	"dropList":    dropList,
	"counterList": counterList,
	"onoff":       func(b bool) string { return map[bool]string{true: "on", false: "off"}[b] },
	"num":         func(n int) string { return formatCount(uint64(max(n, 0))) },
	"percent":     func(r float64) string { return fmt.Sprintf("%.1f%%", r*100) },
	"secs":        func(s float64) string { return formatUptime(max(s, 0)) },
	"prev":        func(n int) int { return n - 1 },
	"next":        func(n int) int { return n + 1 },
	"liveStates": func(l []FlowCount) []FlowCount {
		var out []FlowCount // the metrics list every state; the page only those in use
		for _, c := range l {
			if c.Flows > 0 {
				out = append(out, c)
			}
		}
		return out
	},
	"refresh": func() string { return pageRefresh },
	"script":  func() template.JS { return template.JS(pageJS) },
	"cpu":     func(p float64) string { return fmt.Sprintf("%.1f%%", p) },
	"ts":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	// services.go
	"when":       formatWhen,
	"latency":    formatLatency,
	"leaseClass": leaseClass,
	"addrs":      addrList,
	"qps":        func(v float64) string { return formatSI(v, "q/s") },
	"pageLeases": pageLeases,
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<noscript><meta http-equiv="refresh" content="{{refresh}}"></noscript>
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gvrouter status</title>
<style>
:root { --fg:#1f2328; --muted:#656d76; --bg:#ffffff; --head:#f6f8fa; --line:#d0d7de;
        --up:#1a7f37; --upbg:#dafbe1; --down:#cf222e; --downbg:#ffebe9; --other:#9a6700; --otherbg:#fff8c5;
        --rx:#0969da; --tx:#bf3989; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 24px; padding: 14px 24px;
         background: #24292f; color: #f6f8fa; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header span { color: #c9d1d9; }
header b { color: #ffffff; font-weight: 600; }
#live { margin-left: auto; font-size: 12px; }
#live.stale { color: #ffb4ab; }
main { padding: 8px 24px 24px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
.wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
table.narrow { width: auto; min-width: 60%; }
td.drops-cell { white-space: normal; min-width: 9em; }
th, td { padding: 6px 9px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; white-space: nowrap; }
th { background: var(--head); font-weight: 600; font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
tbody tr:hover { background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.addrs { white-space: normal; overflow-wrap: anywhere; min-width: 11em; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.sub { color: var(--muted); font-size: 12px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.badge.up { color: var(--up); background: var(--upbg); }
.badge.down { color: var(--down); background: var(--downbg); }
.badge.other { color: var(--other); background: var(--otherbg); }
.drops { color: var(--down); }
.none { color: var(--muted); }
.alert { margin: 12px 0 4px; padding: 8px 12px; border-radius: 6px; color: var(--down); background: var(--downbg); font-weight: 600; }
.empty { color: var(--muted); font-style: italic; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 10em; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 18px; font-weight: 600; font-variant-numeric: tabular-nums; }
.graphs { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.graph { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px 8px; min-width: 0; }
.graph h3 { margin: 0 0 2px; font-size: 13px; font-weight: 600; }
.graph svg { display: block; width: 100%; height: 64px; background: var(--head); border-radius: 3px; }
.graph .legend { display: flex; justify-content: space-between; gap: 8px; font-size: 12px; color: var(--muted); font-variant-numeric: tabular-nums; margin-top: 6px; }
.rx { color: var(--rx); } .tx { color: var(--tx); }
details { margin-top: 22px; }
details summary { cursor: pointer; font-size: 16px; font-weight: 600; }
th.wrapth { white-space: normal; }
table.fit td, table.fit th { white-space: normal; }
footer { padding: 0 24px 20px; color: var(--muted); font-size: 12px; }
footer a { color: inherit; }
@media (max-width: 700px) {
  header, main, footer { padding-left: 10px; padding-right: 10px; }
  #live { margin-left: 0; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack thead { display: none; }
  table.stack tr { border: 1px solid var(--line); border-radius: 6px; margin-bottom: 8px; }
  table.stack td { display: flow-root; white-space: normal; text-align: right; overflow-wrap: anywhere; }
  table.stack td::before { float: left; margin-right: 12px; color: var(--muted); font-size: 12px; text-transform: uppercase; text-align: left; }
  table.stack td.empty::before { content: none; }
  #ifaces td:nth-child(1)::before { content: "Name"; } #ifaces td:nth-child(2)::before { content: "Port"; }
  #ifaces td:nth-child(3)::before { content: "State"; } #ifaces td:nth-child(4)::before { content: "Addresses"; }
  #ifaces td:nth-child(5)::before { content: "MAC"; } #ifaces td:nth-child(6)::before { content: "MTU"; }
  #ifaces td:nth-child(7)::before { content: "Receiving"; } #ifaces td:nth-child(8)::before { content: "Sending"; }
  #ifaces td:nth-child(9)::before { content: "Drops"; }
  #ports td:nth-child(1)::before { content: "Name"; } #ports td:nth-child(2)::before { content: "State"; }
  #ports td:nth-child(3)::before { content: "MAC"; } #ports td:nth-child(4)::before { content: "MTU"; }
  #ports td:nth-child(5)::before { content: "Queues"; } #ports td:nth-child(6)::before { content: "Receiving"; }
  #ports td:nth-child(7)::before { content: "Sending"; } #ports td:nth-child(8)::before { content: "Drops"; }
  #hosts td:nth-child(1)::before { content: "Interface"; } #hosts td:nth-child(2)::before { content: "Address"; }
  #hosts td:nth-child(3)::before { content: "MAC"; } #hosts td:nth-child(4)::before { content: "Name"; }
  #hosts td:nth-child(5)::before { content: "State"; }
  table.narrow { min-width: 0; }
  td.drops-cell { min-width: 0; }
}
</style>
</head>
<body>
<header>
<h1>gvrouter</h1>
<span>version <b id="version">{{or .Version "unknown"}}</b></span>
<span>build <b id="build">{{or .Build "unknown"}}</b></span>
<span>uptime <b id="uptime">{{if .Started.IsZero}}unknown{{else}}{{uptime .UptimeSeconds}}{{end}}</b></span>
<span>sampled <b id="sample" data-seq="{{.Seq}}" data-time="{{.Time.UTC.Format "2006-01-02T15:04:05.000Z07:00"}}">{{ts .Time}}</b></span>
<span id="live">sample {{.Seq}}</span>
</header>
<main>
<section id="s-alerts">{{template "alerts" .Snapshot}}</section>
<section id="s-router">{{template "router" .Snapshot}}</section>
<h2>Traffic, last 15 minutes</h2>
<div id="graphs" class="graphs"><noscript><p class="empty">The graphs need JavaScript; <a href="api/history">api/history</a> has their data.</p></noscript></div>
<section id="s-interfaces">{{template "interfaces" .Snapshot}}</section>
<section id="s-ports">{{template "ports" .Snapshot}}</section>
<section id="s-conntrack">{{template "conntrack" .Snapshot}}</section>
<section id="s-sqm">{{template "sqm" .Snapshot}}</section>
<section id="s-portmap">{{template "portmap" .Snapshot}}</section>
<section id="s-hosts">{{template "hosts" .}}</section>
<section id="s-services">{{template "services" .Snapshot}}</section>
<section id="s-ipv6">{{template "ipv6" .Snapshot}}</section>
<section id="s-macsec">{{template "macsec" .Snapshot}}</section>
<section id="s-wireguard">{{template "wireguard" .Snapshot}}</section>
<section id="s-routes">{{template "routes" .Snapshot}}</section>
<details id="details"><summary>Internal counters</summary>
<section id="s-internals">{{template "internals" .Snapshot}}</section>
</details>
{{- if .TableHidden}}
<p><a href="?table=1">Show the conntrack table</a> <span class="sub">({{num .Conntrack.Flows}} flows; also as <a href="api/conntrack">JSON</a>)</span></p>
{{- end}}
{{- if .TableError}}
<p class="drops">conntrack table: {{.TableError}}</p>
{{- end}}
{{- with .Table}}

<h2>Conntrack table</h2>
<form method="get" action=""><span class="sub">{{num .Total}} flows{{if .Addr}} matching <span class="mono">{{.Addr}}</span>{{end}}, page {{.Page}} of {{.Pages}}, as the page was loaded</span>
<input name="addr" value="{{.Addr}}" placeholder="address or prefix" size="24"> <button>filter</button>
{{- if gt .Page 1}} <a href="?addr={{.Addr}}&amp;page={{prev .Page}}">previous</a>{{end}}
{{- if lt .Page .Pages}} <a href="?addr={{.Addr}}&amp;page={{next .Page}}">next</a>{{end}}
</form>
<div class="wrap"><table>
<thead><tr>
<th>Proto</th><th>State</th><th>Original</th><th>Reply</th><th>Flags</th>
<th class="num">Packets</th><th class="num">Bytes</th><th class="num">Expires</th>
</tr></thead>
<tbody>
{{- range .Flows}}
<tr>
<td class="mono">{{.Proto}}</td>
<td class="mono">{{.State}}</td>
<td class="mono">{{.Src}} &rarr; {{.Dst}}</td>
<td class="mono">{{if .ReplySrc.IsValid}}{{.ReplySrc}} &rarr; {{.ReplyDst}}{{else}}<span class="none">unconfirmed</span>{{end}}</td>
<td class="mono">{{if .Assured}}ASSURED {{end}}{{if .Offloaded}}OFFLOAD{{end}}</td>
<td class="num">{{count .PacketsOrig}} / {{count .PacketsReply}}</td>
<td class="num">{{bytes .BytesOrig}} / {{bytes .BytesReply}}</td>
<td class="num">{{secs .ExpiresSeconds}}</td>
</tr>
{{- else}}
<tr><td colspan="8" class="empty">no flows</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
</main>
<footer>Read-only. Also as <a href="api/status">JSON</a>, the <a href="api/history">last 15 minutes as JSON</a>{{if .Conntrack}}, the <a href="api/conntrack">conntrack table as JSON</a>{{end}} and <a href="metrics">Prometheus metrics</a>. Rates are over the last sample interval; the page updates itself every second.</footer>
<script>{{script}}</script>
</body>
</html>
{{define "alerts" -}}
{{- range .DHCPClients}}{{if .LastError}}
<p class="alert">WAN lease on {{.Interface}}: {{.LastError}}</p>
{{- end}}{{end}}
{{- end}}
{{define "router" -}}
<div class="cards">
{{- with .Process}}
<div class="card"><div class="k">CPU</div><div class="v">{{cpu .CPUPercent}}</div><div class="sub">of one core; {{.CPUs}} cores, {{secs .CPUSeconds}} used</div></div>
<div class="card"><div class="k">Memory</div><div class="v">{{if .RSSBytes}}{{bytes .RSSBytes}}{{else}}unknown{{end}}</div><div class="sub">resident; Go heap {{bytes .HeapBytes}} of {{bytes .GoMemoryBytes}}</div></div>
<div class="card"><div class="k">Goroutines</div><div class="v">{{num .Goroutines}}</div><div class="sub">page connections {{$.HTTP.Open}}, refused {{count $.HTTP.Refused}}</div></div>
{{- end}}
{{- with .Conntrack}}
<div class="card"><div class="k">Connections</div><div class="v">{{num .Flows}}</div><div class="sub">of {{num .Max}}; {{num .Offloaded}} on the fast path</div></div>
{{- end}}
{{- range .DHCPClients}}
<div class="card"><div class="k">address on {{.Interface}}</div><div class="v mono">{{if .Addr.IsValid}}{{.Addr}}{{else}}no lease{{end}}</div><div class="sub">{{or .State "unknown"}}{{with when $.Time .Expiry}}, until {{.}}{{end}}</div></div>
{{- end}}
</div>
{{- end}}
{{define "interfaces" -}}
<h2>Interfaces</h2>
<div class="wrap"><table id="ifaces" class="stack">
<thead><tr>
<th>Name</th><th>Port</th><th>State</th><th>Addresses</th><th>MAC</th><th class="num">MTU</th>
<th class="num">Receiving</th><th class="num">Sending</th><th>Drops</th>
</tr></thead>
<tbody>
{{- range .Interfaces}}
<tr>
<td><b>{{.Name}}</b></td>
<td class="mono">{{.Port}}{{if .VLAN}}<br><span class="sub">{{.VLANProtocol}} vlan {{range $i, $v := .VLAN}}{{if $i}}, {{end}}{{$v}}{{end}}{{with .PCP}} pcp {{.}}{{end}}</span>{{end}}</td>
<td><span class="badge {{state .State}}" data-iface="{{.Name}}">{{.State}}</span></td>
<td class="mono addrs">{{range $i, $a := .Addresses}}{{if $i}}<br>{{end}}{{$a}}{{else}}<span class="none">none</span>{{end}}</td>
<td class="mono">{{.MAC}}</td>
<td class="num">{{.MTU}}</td>
<td class="num"><span class="rx">{{bits .Rates.RxBitsPerSecond}}</span><br><span class="sub">{{pps .Rates.RxPacketsPerSecond}}</span><br><span class="sub">{{bytes .RxBytes}}, {{count .RxPackets}} pkts</span></td>
<td class="num"><span class="tx">{{bits .Rates.TxBitsPerSecond}}</span><br><span class="sub">{{pps .Rates.TxPacketsPerSecond}}</span><br><span class="sub">{{bytes .TxBytes}}, {{count .TxPackets}} pkts</span></td>
<td class="drops-cell">{{template "drops" .Drops}}</td>
</tr>
{{- else}}
<tr><td colspan="9" class="empty">no interfaces</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{define "ports" -}}
<h2>Ports</h2>
<div class="wrap"><table id="ports" class="stack">
<thead><tr>
<th>Name</th><th>State</th><th>MAC</th><th class="num">MTU</th><th class="num">Queues</th>
<th class="num">Receiving</th><th class="num">Sending</th><th>Drops</th>
</tr></thead>
<tbody>
{{- range .Ports}}
<tr>
<td class="mono"><b>{{.Name}}</b>{{if .Driver}}<br><span class="sub">{{.Driver}}{{if .Mode}}, {{.Mode}}{{end}}</span>{{end}}{{with .UMEM}}<br><span class="sub">{{if .SharedWith}}UMEM shared with {{range $i, $p := .SharedWith}}{{if $i}}, {{end}}{{$p}}{{end}}{{else}}UMEM not shared{{end}}</span>{{end}}</td>
<td><span class="badge {{state .State}}" data-port="{{.Name}}">{{.State}}</span></td>
<td class="mono">{{.MAC}}</td>
<td class="num">{{.MTU}}</td>
<td class="num">{{.Queues}}</td>
<td class="num"><span class="rx">{{bits .Rates.RxBitsPerSecond}}</span><br><span class="sub">{{pps .Rates.RxPacketsPerSecond}}</span><br><span class="sub">{{bytes .RxBytes}}, {{count .RxPackets}} pkts</span></td>
<td class="num"><span class="tx">{{bits .Rates.TxBitsPerSecond}}</span><br><span class="sub">{{pps .Rates.TxPacketsPerSecond}}</span><br><span class="sub">{{bytes .TxBytes}}, {{count .TxPackets}} pkts</span>{{with .UMEM}}<br><span class="sub">{{count .TxZeroCopy}} zero-copy, {{count .TxCopied}} copied</span>{{end}}</td>
<td class="drops-cell">{{template "drops" .Drops}}{{template "port-aqm" .AQM}}</td>
</tr>
{{- else}}
<tr><td colspan="8" class="empty">no ports</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{define "port-aqm" -}}
{{with .}}<br><span class="sub">queue {{if .On}}on{{else}}off{{end}}: {{num .Backlog}} waiting, max {{printf "%.1f" .MaxSojournMs}} ms; {{count .Marked}} ECN marked, {{count .Dropped}} dropped, {{count .Overlimit}} over limit</span>{{end}}
{{- end}}
{{define "routes" -}}
<h2>Routes</h2>
<div class="wrap"><table class="narrow">
<thead><tr><th>Destination</th><th>Gateway</th><th>Interface</th></tr></thead>
<tbody>
{{- range .Routes}}
<tr>
<td class="mono">{{.To}}</td>
<td class="mono">{{if .Via}}{{.Via}}{{else}}<span class="none">on-link</span>{{end}}</td>
<td class="mono">{{if .Dev}}{{.Dev}}{{else}}<span class="none">by gateway</span>{{end}}</td>
</tr>
{{- else}}
<tr><td colspan="3" class="empty">no routes</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{define "hosts" -}}
{{- if .Neighbors}}
<h2>Hosts on the networks</h2>
<div class="wrap"><table id="hosts" class="narrow stack">
<thead><tr><th>Interface</th><th>Address</th><th>MAC</th><th>Name</th><th>State</th></tr></thead>
<tbody>
{{- range .Neighbors}}
<tr>
<td>{{.Interface}}</td>
<td class="mono">{{.Address}}</td>
<td class="mono">{{with .MAC}}{{.}}{{else}}<span class="none">resolving</span>{{end}}</td>
<td>{{with $.HostName .MAC}}{{.}}{{else}}<span class="none">none</span>{{end}}</td>
<td>{{.State}}</td>
</tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{- end}}
{{define "conntrack" -}}
{{- with .Conntrack}}
<h2>Connection tracking</h2>
<div class="wrap"><table class="narrow">
<thead><tr>
<th class="num">Flows</th><th class="num">Assured</th><th class="num">Offloaded</th><th class="num">New flows</th>
<th class="num">Fast path</th><th>Slow path</th><th>Drops</th>
</tr></thead>
<tbody><tr>
<td class="num">{{num .Flows}}<br><span class="sub">of {{num .Max}}; the router's {{num .RouterFlows}} (reserve {{num .RouterReserve}})</span></td>
<td class="num">{{num .Assured}}</td>
<td class="num">{{num .Offloaded}}</td>
<td class="num">{{count (index .Events "created")}}<br><span class="sub">{{pps .Rates.NewFlowsPerSecond}}</span></td>
<td class="num">{{count .FastPathHits}} pkts<br><span class="sub">{{percent .FastPathRatio}} hit, {{pps .Rates.FastPathPacketsPerSecond}}</span></td>
<td class="drops-cell">{{template "counts" .SlowPath}}<span class="sub">{{pps .Rates.SlowPathPacketsPerSecond}}</span></td>
<td class="drops-cell">{{template "drops" .Drops}}</td>
</tr></tbody>
</table></div>

<div class="wrap"><table class="narrow">
<thead><tr><th>Protocol</th><th>State</th><th class="num">Flows</th></tr></thead>
<tbody>
{{- range liveStates .States}}
<tr><td class="mono">{{.Proto}}</td><td class="mono">{{.State}}</td><td class="num">{{num .Flows}}</td></tr>
{{- else}}
<tr><td colspan="3" class="empty">no flows</td></tr>
{{- end}}
</tbody>
</table></div>

<h2>NAT ports</h2>
<div class="wrap"><table class="narrow">
<thead><tr><th>External address</th><th>Protocol</th><th class="num">Ports in use</th><th class="num">Flows</th></tr></thead>
<tbody>
{{- range .NATPorts}}
<tr><td class="mono">{{.Address}}</td><td class="mono">{{.Proto}}</td><td class="num">{{num .Ports}}</td><td class="num">{{num .Flows}}</td></tr>
{{- else}}
<tr><td colspan="4" class="empty">no mappings</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{- end}}
{{define "macsec" -}}
{{- range .MACsec}}
<h2>MACsec {{.Name}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>on</td><td class="mono">{{.On}}</td></tr>
<tr><td>secy</td><td class="mono">sci {{.SCI}} cipher {{.Cipher}}{{with .CipherConfigured}} (configured {{.}}, changed by mka){{end}} encrypt {{onoff .Encrypt}} protect {{onoff .Protect}} send_sci {{onoff .SendSCI}} end_station {{onoff .EndStation}} scb {{onoff .SCB}} replay {{onoff .Replay}} window {{.Window}} validate {{.Validate}} encodingsa {{.EncodingSA}}</td></tr>
<tr><td>TXSC</td><td class="mono">{{.SCI}}{{range .TXSA}}<br>{{.AN}}: PN {{.NextPN}}, state {{.State}}, key {{.KeyID}}{{end}}</td></tr>
{{- range .RXSC}}
<tr><td>RXSC</td><td class="mono">{{.SCI}}{{range .SA}}<br>{{.AN}}: PN {{.NextPN}}, state {{.State}}, key {{.KeyID}}{{end}}</td></tr>
{{- end}}
{{- with .MKA}}
<tr><td>MKA</td><td class="mono">ckn {{.CKN}} priority {{.Priority}} mi {{.MI}} mn {{.MN}} key server {{if .KeyServer}}this SecY{{else}}{{or .KeyServerSCI "none"}}{{end}}</td></tr>
{{- range .Live}}
<tr><td>live peer</td><td class="mono">sci {{.SCI}} mi {{.MI}} mn {{.MN}} priority {{.Priority}}</td></tr>
{{- end}}
{{- range .Potential}}
<tr><td>potential peer</td><td class="mono">sci {{.SCI}} mi {{.MI}} mn {{.MN}} priority {{.Priority}}</td></tr>
{{- end}}
{{- with .Latest}}<tr><td>latest key</td><td class="mono">kn {{.KN}} an {{.AN}} rx {{.RX}} tx {{.TX}}</td></tr>{{end}}
{{- with .Previous}}<tr><td>previous key</td><td class="mono">kn {{.KN}} an {{.AN}} rx {{.RX}} tx {{.TX}}</td></tr>{{end}}
<tr><td>last roll</td><td class="mono">{{if .LastRoll.IsZero}}never{{else}}{{.LastRoll.UTC.Format "2006-01-02 15:04:05Z"}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="wrap"><table class="narrow">
<thead><tr><th>Scope</th><th>Counters</th></tr></thead>
<tbody>
<tr><td>secy</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
<tr><td>tx sc</td><td class="drops-cell">{{template "counters" .TXSC}}</td></tr>
{{- with .MKA}}
<tr><td>mka</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
{{- end}}
{{- range .TXSA}}
<tr><td>tx sa {{.AN}}</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
{{- end}}
{{- range $sc := .RXSC}}
<tr><td>rx sc {{$sc.SCI}}</td><td class="drops-cell">{{template "counters" $sc.Counters}}</td></tr>
{{- range $sc.SA}}
<tr><td>rx sa {{.AN}}</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
{{- end}}
{{- end}}
</tbody>
</table></div>
{{- end}}
{{- end}}
{{define "internals" -}}
<p class="sub">Counters of the router's own machinery, for debugging a slow or lossy path; the metrics have each of them.</p>
<div class="wrap"><table>
<thead><tr>
<th>Interface</th><th class="wrapth">Receive coalescing</th><th class="num wrapth">Segments merged</th><th class="num wrapth">Packets after merging</th>
<th class="num wrapth">Forwarded TCP left unmerged</th><th class="num wrapth">Merged packets split on send</th>
<th class="num wrapth">Checksums checked in software</th><th class="num wrapth">Bad checksums</th>
<th class="num wrapth">Forwarded straight to a known next hop</th><th class="num wrapth">Frames taken by DHCP</th>
<th class="num wrapth" title="frames of up to 64 KiB from a local sender with TSO/GSO">Superframes in / sent whole / cut in software</th>
</tr></thead>
<tbody>
{{- range .Interfaces}}
<tr>
<td><b>{{.Name}}</b></td>
<td>{{or .GROMode "unknown"}}</td>
{{- with .GRO}}
<td class="num">{{count .Coalesced}}</td><td class="num">{{count .Flushed}}</td><td class="num">{{count .BypassedForward}}</td>
<td class="num">{{count .Segmented}}</td><td class="num">{{count .ChecksumVerified}}</td><td class="num">{{count .ChecksumBad}}</td>
{{- else}}
<td class="num none">-</td><td class="num none">-</td><td class="num none">-</td><td class="num none">-</td><td class="num none">-</td><td class="num none">-</td>
{{- end}}
<td class="num">{{count .NextHopForwarded}}</td>
<td class="num">{{count .Tapped}}</td>
<td class="num">{{count .GSO.Received}} / {{count .GSO.SentWhole}} / {{count .GSO.Segmented}}</td>
</tr>
{{- else}}
<tr><td colspan="11" class="empty">no interfaces</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="wrap"><table class="narrow">
<tbody>
{{- with .Netstack}}
<tr><td>IP packets into the IP stack (slow path or for the router)</td><td class="num">{{count .IPPacketsReceived}}</td></tr>
<tr><td>IP packets delivered to the router itself</td><td class="num">{{count .IPPacketsDelivered}}</td></tr>
<tr><td>IP packets the IP stack sent</td><td class="num">{{count .IPPacketsSent}}</td></tr>
{{- end}}
{{- with .Fragments}}
<tr><td title="fragments refused before NAT (RFC 1858, RFC 5722, RFC 7112) are the interfaces' drops">overlapping and tiny fragments (RFC 5722, RFC 1858)</td><td>fragment guard: {{.Tracked}} datagrams tracked, {{count .Evicted}} evicted early</td></tr>
{{- end}}
<tr><td>status page connections</td><td>{{.HTTP.Open}} open, {{count .HTTP.Refused}} refused</td></tr>
<tr><td title="403: a Host naming none of the router's addresses or names (DNS rebinding), a read of /api or /metrics from another origin">status page requests forbidden</td><td>{{count .HTTP.ForbiddenHost}} foreign Host, {{count .HTTP.ForbiddenOrigin}} cross-origin</td></tr>
</tbody>
</table></div>
{{- end}}
{{define "pppoe" -}}
{{- range .PPPoE}}

<h2>PPPoE {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>state</td><td><span class="badge {{if eq .State "up"}}up{{else}}down{{end}}">{{or .State "unknown"}}</span>{{if eq .State "up"}} for {{uptime .UptimeSeconds}}{{end}}</td></tr>
<tr><td>session</td><td class="mono">{{if .SessionID}}id {{.SessionID}} AC {{or .ACName "unnamed"}} ({{.ACMAC}}){{with .Service}} service {{.}}{{end}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>reconnects</td><td>{{.Reconnects}}{{with .LastDownReason}}, last because: <span class="drops">{{.}}</span>{{end}}</td></tr>
{{- with .AuthMessage}}
<tr><td>auth message</td><td class="drops">{{.}}</td></tr>
{{- end}}
<tr><td>LCP</td><td class="mono">{{with .MTU}}MTU {{.}}{{end}}{{with .MRU}} MRU {{.}}{{end}}{{with .MaxPayload}} PPP-Max-Payload {{.}} (RFC 4638){{end}}{{with .Auth}} auth {{.}}{{end}} echo RTT {{printf "%.1f" .EchoRTTMillis}} ms</td></tr>
<tr><td>IPCP</td><td class="mono">{{with .IPv4}}{{.Local}}{{if .Peer.IsValid}} peer {{.Peer}}{{end}}{{with addrs .DNS}} DNS {{.}}{{end}}{{else}}<span class="none">not open</span>{{end}}</td></tr>
<tr><td>IPv6CP</td><td class="mono">{{with .IPv6}}{{.Local}}{{if .Peer.IsValid}} peer {{.Peer}}{{end}}{{else}}<span class="none">not open</span>{{end}}</td></tr>
<tr><td>counters</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- end}}
{{define "services" -}}
{{template "pppoe" .}}
{{- range .DHCPClients}}

<h2>WAN lease {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>state</td><td><span class="badge {{leaseClass .State}}">{{or .State "unknown"}}</span></td></tr>
{{- if .LastError}}
<tr><td>last error</td><td class="drops">{{.LastError}}</td></tr>
{{- end}}
<tr><td>address</td><td class="mono">{{if .Addr.IsValid}}{{.Addr}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>server</td><td class="mono">{{if .Server.IsValid}}{{.Server}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>routers</td><td class="mono">{{with addrs .Routers}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>routes</td><td class="mono">{{range .Routes}}<div>{{.Dst}} {{if and .Via.IsValid (not .Via.IsUnspecified)}}via {{.Via}}{{else}}on-link{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNS</td><td class="mono">{{with addrs .DNS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>domain</td><td class="mono">{{with .Domain}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>MTU</td><td>{{with .MTU}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>acquired</td><td>{{with when $.Time .Acquired}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>renew (T1)</td><td>{{with when $.Time .T1}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>rebind (T2)</td><td>{{with when $.Time .T2}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>expiry</td><td>{{with when $.Time .Expiry}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- range .DHCPServers}}

<h2>DHCP leases {{.Interface}}</h2>
<p class="sub">pool {{num .PoolUsed}} of {{num .PoolSize}} in use{{if .RangeStart.IsValid}}, range <span class="mono">{{.RangeStart}}&ndash;{{.RangeEnd}}</span>{{end}}{{if .Offered}}, {{num .Offered}} offered{{end}}{{if .Declined}}, {{num .Declined}} declined{{end}}</p>
{{- with .LeaseFileError}}
<p class="alert">lease file: {{.}}</p>
{{- end}}
{{- $leases := pageLeases .Leases}}
<div class="wrap"><table>
<thead><tr><th>MAC</th><th>Address</th><th>Hostname</th><th>Expiry</th><th>Type</th><th>State</th></tr></thead>
<tbody>
{{- range $leases.Shown}}
<tr>
<td class="mono">{{.MAC}}</td>
<td class="mono">{{.Addr}}</td>
<td>{{with .Hostname}}{{.}}{{else}}<span class="none">none</span>{{end}}</td>
<td>{{with when $.Time .Expiry}}{{.}}{{else}}<span class="none">none</span>{{end}}</td>
<td>{{.Kind}}</td>
<td>{{.LeaseState}}</td>
</tr>
{{- else}}
<tr><td colspan="6" class="empty">no leases</td></tr>
{{- end}}
</tbody>
</table></div>
{{- with $leases.Hidden}}
<p class="sub">and {{num .}} more leases (all in <a href="api/status">JSON</a>)</p>
{{- end}}
<div class="wrap"><table class="narrow">
<thead><tr><th>Events</th><th>Drops</th></tr></thead>
<tbody><tr><td class="drops-cell">{{template "counts" .Counters}}</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr></tbody>
</table></div>
{{- end}}
{{- with .DNS}}

<h2>DNS</h2>
<div class="wrap"><table class="narrow fit">
<thead><tr>
<th>Listen</th><th>Upstreams</th><th class="num">Queries</th><th class="num">Cache</th><th class="num">Local answers</th>
<th class="num">Upstream queries</th><th>Upstream errors</th><th>Drops</th>
</tr></thead>
<tbody><tr>
<td class="mono">{{range .Listen}}<div>{{.}}</div>{{else}}<span class="none">none</span>{{end}}</td>
<td class="mono">{{range .Upstreams}}<div>{{.Address}} <span class="sub">{{.Source}}</span></div>{{else}}<span class="none">none</span>{{end}}</td>
<td class="num">{{count .QueriesTotal}}<br><span class="sub">{{range counterList .Queries}}{{.Reason}} {{count .Count}}, {{end}}{{qps .Rates.QueriesPerSecond}}</span></td>
<td class="num">{{percent .HitRatio}} hit<br><span class="sub">{{count .CacheHits}} hits, {{count .CacheMisses}} misses<br>{{num .CacheEntries}}{{if .CacheMax}} of {{num .CacheMax}}{{end}} entries</span></td>
<td class="num">{{count .LocalAnswers}}</td>
<td class="num">{{count .UpstreamQueries}}<br><span class="sub">mean latency {{latency .MeanLatency}}, {{num .InFlight}} in flight</span></td>
<td class="drops-cell">{{template "drops" .UpstreamErrors}}</td>
<td class="drops-cell">{{template "drops" .Drops}}</td>
</tr></tbody>
</table></div>
{{- end}}
{{- end}}
{{define "ipv6" -}}
{{- with .IPv6}}
{{- with .Delegation}}

<h2>IPv6 delegation {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>state</td><td><span class="badge {{leaseClass .State}}">{{or .State "unknown"}}</span></td></tr>
{{- if .LastError}}
<tr><td>last error</td><td class="drops">{{.LastError}}</td></tr>
{{- end}}
<tr><td>prefixes</td><td class="mono">{{range .Prefixes}}<div>{{.Prefix}} preferred {{with when $.Time .PreferredUntil}}{{.}}{{else}}none{{end}}, valid {{with when $.Time .ValidUntil}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>address</td><td class="mono">{{with .Address}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>server DUID</td><td class="mono">{{with .Server}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>our DUID</td><td class="mono">{{with .DUID}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>renew (T1)</td><td>{{with when $.Time .T1}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>rebind (T2)</td><td>{{with when $.Time .T2}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNS</td><td class="mono">{{with addrs .DNS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>domains</td><td class="mono">{{range .Domains}}<div>{{.}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- range .WANRA}}

<h2>IPv6 router advertisements heard on {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>routers</td><td class="mono">{{range .Routers}}<div>{{.Addr}} {{.MAC}} {{.Preference}}{{with .Reachability}} {{.}}{{end}}, until {{with when $.Time .Expires}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>prefixes</td><td class="mono">{{range .Prefixes}}<div>{{.Prefix}}{{if .OnLink}} on-link{{end}}{{if .Autonomous}} autonomous{{end}}, valid until {{with when $.Time .ValidUntil}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNS</td><td class="mono">{{with addrs .DNSServers}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>MTU</td><td>{{with .MTU}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- range .LANRA}}

<h2>IPv6 router advertisements sent on {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>prefixes</td><td class="mono">{{range .Prefixes}}<div>{{.Prefix}}{{if .Withdrawn}} <span class="badge down">withdrawn</span>{{end}} preferred until {{with when $.Time .PreferredUntil}}{{.}}{{else}}none{{end}}, valid until {{with when $.Time .ValidUntil}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>flags</td><td class="mono">{{if .Managed}}M {{end}}{{if .Other}}O{{end}}{{if not (or .Managed .Other)}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>RDNSS</td><td class="mono">{{with addrs .RDNSS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNSSL</td><td class="mono">{{range .DNSSL}}<div>{{.}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>MTU</td><td>{{with .MTU}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- range .DHCPv6Servers}}

<h2>Stateless DHCPv6 on {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>DNS</td><td class="mono">{{with addrs .DNS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>domains</td><td class="mono">{{range .Domains}}<div>{{.}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- end}}
{{- end}}
{{define "counts" -}}
{{range dropList .}}<div><span class="mono">{{.Reason}}</span> {{count .Count}}</div>{{else}}<span class="none">none</span>{{end}}
{{- end}}
{{define "counters" -}}
{{range counterList .}}<div class="drops"><span class="mono">{{.Reason}}</span> {{count .Count}}</div>{{end}}
{{- end}}
{{define "drops" -}}
{{range dropList .}}<div class="drops"><span class="mono">{{.Reason}}</span> {{count .Count}}</div>{{else}}<span class="none">none</span>{{end}}
{{- end}}
`
