package status

import (
	"fmt"
	"html/template"
	"time"
)

// pageRefresh is how often the page reloads itself: two sample intervals, so
// every reload shows a new sample and new rates.
const pageRefresh = "2"

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
<meta http-equiv="refresh" content="{{refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gvrouter status</title>
<style>
:root { --fg:#1f2328; --muted:#656d76; --bg:#ffffff; --head:#f6f8fa; --line:#d0d7de;
        --up:#1a7f37; --upbg:#dafbe1; --down:#cf222e; --downbg:#ffebe9; --other:#9a6700; --otherbg:#fff8c5; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 8px 28px; padding: 14px 24px;
         background: #24292f; color: #f6f8fa; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header span { color: #c9d1d9; }
header b { color: #ffffff; font-weight: 600; }
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
footer { padding: 0 24px 20px; color: var(--muted); font-size: 12px; }
footer a { color: inherit; }
</style>
</head>
<body>
<header>
<h1>gvrouter</h1>
<span>version <b>{{or .Version "unknown"}}</b></span>
<span>build <b>{{or .Build "unknown"}}</b></span>
<span>uptime <b>{{if .Started.IsZero}}unknown{{else}}{{uptime .UptimeSeconds}}{{end}}</b></span>
<span>sampled <b>{{ts .Time}}</b></span>
<span>page connections <b>{{.HTTP.Open}}</b> refused <b>{{.HTTP.Refused}}</b></span>
</header>
<main>
{{- range .DHCPClients}}{{if .LastError}}
<p class="alert">WAN lease on {{.Interface}}: {{.LastError}}</p>
{{- end}}{{end}}
<h2>Interfaces</h2>
<div class="wrap"><table>
<thead><tr>
<th>Name</th><th>Port</th><th>State</th><th>MAC</th><th>Addresses</th><th class="num">MTU</th>
<th class="num">RX total</th><th class="num">RX rate</th><th class="num">TX total</th><th class="num">TX rate</th><th>Drops</th>
</tr></thead>
<tbody>
{{- range .Interfaces}}
<tr>
<td><b>{{.Name}}</b></td>
<td class="mono">{{.Port}}{{if .VLAN}}<br><span class="sub">{{.VLANProtocol}} vlan {{range $i, $v := .VLAN}}{{if $i}}, {{end}}{{$v}}{{end}}{{with .PCP}} pcp {{.}}{{end}}</span>{{end}}</td>
<td><span class="badge {{state .State}}">{{.State}}</span></td>
<td class="mono">{{.MAC}}</td>
<td class="mono">{{range $i, $a := .Addresses}}{{if $i}}<br>{{end}}{{$a}}{{else}}<span class="none">none</span>{{end}}</td>
<td class="num">{{.MTU}}{{with .GROMode}}<br><span class="sub">gro {{.}}</span>{{end}}</td>
<td class="num">{{bytes .RxBytes}}<br><span class="sub">{{count .RxPackets}} pkts</span>{{with .GRO}}<br><span class="sub" title="GRO: segments coalesced / packets flushed; forwarded TCP bypassed; merges segmented on egress; checksums verified / bad">gro {{count .Coalesced}}/{{count .Flushed}} fwd {{count .BypassedForward}} seg {{count .Segmented}} csum {{count .ChecksumVerified}}/{{count .ChecksumBad}}</span>{{end}}{{if .NextHopForwarded}}<br><span class="sub" title="first packets of flows forwarded without netstack (next hop known)">next-hop {{count .NextHopForwarded}}</span>{{end}}{{if .Tapped}}<br><span class="sub" title="frames a service's raw-frame tap consumed (DHCP) before netstack and NAT">tapped {{count .Tapped}}</span>{{end}}</td>
<td class="num">{{bits .Rates.RxBitsPerSecond}}<br><span class="sub">{{pps .Rates.RxPacketsPerSecond}}</span></td>
<td class="num">{{bytes .TxBytes}}<br><span class="sub">{{count .TxPackets}} pkts</span></td>
<td class="num">{{bits .Rates.TxBitsPerSecond}}<br><span class="sub">{{pps .Rates.TxPacketsPerSecond}}</span></td>
<td class="drops-cell">{{template "drops" .Drops}}</td>
</tr>
{{- else}}
<tr><td colspan="11" class="empty">no interfaces</td></tr>
{{- end}}
</tbody>
</table></div>
{{with .Fragments}}<p class="sub" title="fragments refused before NAT (RFC 1858, RFC 5722, RFC 7112) are the interfaces' drops">fragment guard: {{.Tracked}} datagrams tracked, {{count .Evicted}} evicted early</p>{{end}}

<h2>Ports</h2>
<div class="wrap"><table>
<thead><tr>
<th>Name</th><th>State</th><th>MAC</th><th class="num">MTU</th><th class="num">Queues</th>
<th class="num">RX total</th><th class="num">RX rate</th><th class="num">TX total</th><th class="num">TX rate</th><th>Drops</th>
</tr></thead>
<tbody>
{{- range .Ports}}
<tr>
<td class="mono"><b>{{.Name}}</b></td>
<td><span class="badge {{state .State}}">{{.State}}</span></td>
<td class="mono">{{.MAC}}</td>
<td class="num">{{.MTU}}</td>
<td class="num">{{.Queues}}</td>
<td class="num">{{bytes .RxBytes}}<br><span class="sub">{{count .RxPackets}} pkts</span></td>
<td class="num">{{bits .Rates.RxBitsPerSecond}}<br><span class="sub">{{pps .Rates.RxPacketsPerSecond}}</span></td>
<td class="num">{{bytes .TxBytes}}<br><span class="sub">{{count .TxPackets}} pkts</span></td>
<td class="num">{{bits .Rates.TxBitsPerSecond}}<br><span class="sub">{{pps .Rates.TxPacketsPerSecond}}</span></td>
<td class="drops-cell">{{template "drops" .Drops}}</td>
</tr>
{{- else}}
<tr><td colspan="10" class="empty">no ports</td></tr>
{{- end}}
</tbody>
</table></div>

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
{{- template "services" .}}
{{- template "ipv6" .}}
{{- with .Conntrack}}

<h2>Connection tracking</h2>
<div class="wrap"><table class="narrow">
<thead><tr>
<th class="num">Flows</th><th class="num">Assured</th><th class="num">Offloaded</th><th class="num">New flows</th>
<th class="num">Fast path</th><th>Slow path</th><th>Drops</th>
</tr></thead>
<tbody><tr>
<td class="num">{{num .Flows}}<br><span class="sub">of {{num .Max}}</span></td>
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
{{- if .TableHidden}}
<p><a href="?table=1">Show the conntrack table</a> <span class="sub">({{num .Conntrack.Flows}} flows; also as <a href="api/conntrack">JSON</a>)</span></p>
{{- end}}
{{- if .TableError}}
<p class="drops">conntrack table: {{.TableError}}</p>
{{- end}}
{{- with .Table}}

<h2>Conntrack table</h2>
<form method="get" action=""><span class="sub">{{num .Total}} flows{{if .Addr}} matching <span class="mono">{{.Addr}}</span>{{end}}, page {{.Page}} of {{.Pages}}</span>
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
{{- range .MACsec}}

<h2>MACsec {{.Name}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>on</td><td class="mono">{{.On}}</td></tr>
<tr><td>secy</td><td class="mono">sci {{.SCI}} cipher {{.Cipher}} encrypt {{onoff .Encrypt}} protect {{onoff .Protect}} send_sci {{onoff .SendSCI}} end_station {{onoff .EndStation}} scb {{onoff .SCB}} replay {{onoff .Replay}} window {{.Window}} validate {{.Validate}} encodingsa {{.EncodingSA}}</td></tr>
<tr><td>TXSC</td><td class="mono">{{.SCI}}{{range .TXSA}}<br>{{.AN}}: PN {{.NextPN}}, state {{.State}}, key {{.KeyID}}{{end}}</td></tr>
{{- range .RXSC}}
<tr><td>RXSC</td><td class="mono">{{.SCI}}{{range .SA}}<br>{{.AN}}: PN {{.NextPN}}, state {{.State}}, key {{.KeyID}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="wrap"><table class="narrow">
<thead><tr><th>Scope</th><th>Counters</th></tr></thead>
<tbody>
<tr><td>secy</td><td class="drops-cell">{{template "counters" .Counters}}</td></tr>
<tr><td>tx sc</td><td class="drops-cell">{{template "counters" .TXSC}}</td></tr>
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
</main>
<footer>Read-only. Also as <a href="api/status">JSON</a>{{if .Conntrack}}, the <a href="api/conntrack">conntrack table as JSON</a>{{end}} and <a href="metrics">Prometheus metrics</a>. Rates are over the last sample interval; the page reloads every {{refresh}} s.</footer>
</body>
</html>
{{define "services" -}}
{{- range .DHCPClients}}

<h2>WAN lease {{.Interface}}</h2>
<div class="wrap"><table class="narrow">
<tbody>
<tr><td>state</td><td><span class="badge {{leaseClass .State}}">{{or .State "unknown"}}</span></td></tr>
{{- if .LastError}}
<tr><td>last error</td><td class="drops">{{.LastError}}</td></tr>
{{- end}}
<tr><td>address</td><td class="mono">{{if .Address.IsValid}}{{.Address}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>server</td><td class="mono">{{if .Server.IsValid}}{{.Server}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>routers</td><td class="mono">{{with addrs .Routers}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>routes</td><td class="mono">{{range .Routes}}<div>{{.To}} {{if .Via}}via {{.Via}}{{else}}on-link{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNS</td><td class="mono">{{with addrs .DNS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>domain</td><td class="mono">{{with .Domain}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>MTU</td><td>{{with .MTU}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>acquired</td><td>{{with when $.Time .Acquired}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>renew (T1)</td><td>{{with when $.Time .Renew}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>rebind (T2)</td><td>{{with when $.Time .Rebind}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>expiry</td><td>{{with when $.Time .Expiry}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>events</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
<tr><td>drops</td><td class="drops-cell">{{template "drops" .Drops}}</td></tr>
</tbody>
</table></div>
{{- end}}
{{- range .DHCPServers}}

<h2>DHCP leases {{.Interface}}</h2>
<p class="sub">pool {{num .PoolUsed}} of {{num .PoolSize}} in use{{if .PoolStart.IsValid}}, range <span class="mono">{{.PoolStart}}&ndash;{{.PoolEnd}}</span>{{end}}{{if .Offered}}, {{num .Offered}} offered{{end}}{{if .Declined}}, {{num .Declined}} declined{{end}}</p>
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
<td class="mono">{{.Address}}</td>
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
<div class="wrap"><table class="narrow">
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
<tr><td>address</td><td class="mono">{{if .Address.IsValid}}{{.Address}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>server DUID</td><td class="mono">{{with .ServerDUID}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>our DUID</td><td class="mono">{{with .DUID}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>renew (T1)</td><td>{{with when $.Time .Renew}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>rebind (T2)</td><td>{{with when $.Time .Rebind}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
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
<tr><td>routers</td><td class="mono">{{range .Routers}}<div>{{.Address}} {{.MAC}} {{.Preference}}, until {{with when $.Time .Expires}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>prefixes</td><td class="mono">{{range .Prefixes}}<div>{{.Prefix}}{{if .OnLink}} on-link{{end}}{{if .Autonomous}} autonomous{{end}}, valid until {{with when $.Time .ValidUntil}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
<tr><td>DNS</td><td class="mono">{{with addrs .DNS}}{{.}}{{else}}<span class="none">none</span>{{end}}</td></tr>
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
<tr><td>prefixes</td><td class="mono">{{range .Prefixes}}<div>{{.Prefix}}{{if .Deprecated}} <span class="badge down">withdrawn</span>{{end}} preferred until {{with when $.Time .PreferredUntil}}{{.}}{{else}}none{{end}}, valid until {{with when $.Time .ValidUntil}}{{.}}{{else}}none{{end}}</div>{{else}}<span class="none">none</span>{{end}}</td></tr>
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
