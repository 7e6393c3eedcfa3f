// gvrouter status page: live updates from /api/status, graphs from
// /api/history. Read-only: GET requests to this server and nothing else.
// Every render function mirrors a template in page.go and must produce
// the same text, so the first update after load changes nothing a
// person sees (the browser test compares them).
"use strict";
(function () {
  const POLL_MS = 1000; // the sampler's interval (status.SampleInterval)
  const KEEP = 900; // samples kept for the graphs (status.HistoryLen)
  const WINDOW_MS = 15 * 60 * 1000;

  // --- escaping and markup -------------------------------------------
  class Raw { constructor(s) { this.s = s; } }
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };
  const esc = (v) => String(v).replace(/[&<>"']/g, (c) => ESC[c]);
  const part = (v) => v instanceof Raw ? v.s : Array.isArray(v) ? v.map(part).join("") :
    v === null || v === undefined || v === false ? "" : esc(v);
  // h is a tagged template: interpolated values are escaped unless Raw.
  function h(strs, ...vals) {
    let out = strs[0];
    vals.forEach((v, i) => { out += part(v) + strs[i + 1]; });
    return new Raw(out);
  }
  const each = (l, f, empty) => (l && l.length ? l.map(f) : empty === undefined ? "" : empty);
  const none = (v) => h`<span class="none">${v}</span>`;

  // --- formatting, as format.go and services.go --------------------------
  // fixed rounds like Go's %.Nf: to nearest, exact ties to even.
  function fixed(x, n) {
    const m = Math.pow(10, n), y = x * m, f = Math.floor(y);
    if (y - f === 0.5 && f % 2 === 0) return (f / m).toFixed(n);
    return x.toFixed(n);
  }
  function bytes(n) {
    if (n < 1024) return Math.trunc(n) + " B";
    let v = n / 1024;
    for (const u of ["KiB", "MiB", "GiB", "TiB", "PiB"]) {
      if (v < 1024) return fixed(v, 2) + " " + u;
      v /= 1024;
    }
    return fixed(v, 2) + " EiB";
  }
  function si(v, unit) {
    if (v < 1000) return fixed(v, 0) + " " + unit;
    for (const p of ["k", "M", "G", "T"]) {
      v /= 1000;
      if (v < 1000) return fixed(v, 2) + " " + p + unit;
    }
    return fixed(v, 2) + " P" + unit;
  }
  const bits = (v) => si(v, "bit/s");
  const pps = (v) => si(v, "pkt/s");
  const qps = (v) => si(v, "q/s");
  function count(n) {
    const s = String(Math.trunc(n || 0));
    let out = "";
    for (let i = 0; i < s.length; i++) {
      if (i > 0 && (s.length - i) % 3 === 0) out += ",";
      out += s[i];
    }
    return out;
  }
  const num = (n) => count(Math.max(n || 0, 0));
  const percent = (r) => fixed((r || 0) * 100, 1) + "%";
  function uptime(sec) {
    let s = Math.trunc(sec);
    const d = Math.floor(s / 86400); s -= d * 86400;
    const hh = Math.floor(s / 3600); s -= hh * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d > 0) return `${d}d ${hh}h ${m}m ${s}s`;
    if (hh > 0) return `${hh}h ${m}m ${s}s`;
    if (m > 0) return `${m}m ${s}s`;
    return `${s}s`;
  }
  const secs = (s) => uptime(Math.max(s || 0, 0));
  const pad = (n) => String(n).padStart(2, "0");
  function ts(t) {
    const d = new Date(t);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
      `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
  }
  // when is formatWhen: "" for a zero (absent) time.
  function when(now, t) {
    if (!t || t.startsWith("0001-01-01")) return "";
    const ms = Date.parse(t) - Date.parse(now);
    const d = Math.sign(ms) * Math.round(Math.abs(ms) / 1000);
    return ts(t) + " (" + (d < 0 ? uptime(-d) + " ago" : "in " + uptime(d)) + ")";
  }
  function latency(s) {
    if (!(s > 0)) return "0 ms";
    if (s < 1e-3) return fixed(s * 1e6, 0) + " µs";
    if (s < 1) return fixed(s * 1e3, 1) + " ms";
    return fixed(s, 2) + " s";
  }
  const stateClass = (s) => (s === "up" ? "up" : s === "down" ? "down" : "other");
  const leaseClass = (s) => (s === "bound" ? "up" : s === "renewing" || s === "rebinding" ? "other" : "down");
  const onoff = (b) => (b ? "on" : "off");
  const byKey = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  const counterList = (m) => Object.entries(m || {}).sort(byKey);
  const dropList = (m) => counterList(m).filter((e) => e[1] > 0);
  const addrs = (l) => (l || []).join(", ");
  const valid = (a) => a !== undefined && a !== null && a !== "";

  const drops = (m) => each(dropList(m), ([r, n]) => h`<div class="drops"><span class="mono">${r}</span> ${count(n)}</div>`, none("none"));
  const counts = (m) => each(dropList(m), ([r, n]) => h`<div><span class="mono">${r}</span> ${count(n)}</div>`, none("none"));
  const counters = (m) => counterList(m).map(([r, n]) => h`<div class="drops"><span class="mono">${r}</span> ${count(n)}</div>`);
  const orNone = (v) => (valid(v) ? v : none("none"));
  const whenOrNone = (now, t) => orNone(when(now, t));

  // --- sections, as the templates in page.go ---------------------------
  function alerts(s) {
    return each(s.dhcp_clients, (c) => c.last_error ? h`<p class="alert">WAN lease on ${c.interface}: ${c.last_error}</p>` : "");
  }
  function router(s) {
    const p = s.process, c = s.conntrack;
    return h`<div class="cards">${p ? h`<div class="card"><div class="k">CPU</div><div class="v">${fixed(p.cpu_percent, 1)}%</div><div class="sub">of one core; ${p.cpus} cores, ${secs(p.cpu_seconds)} used</div></div><div class="card"><div class="k">Memory</div><div class="v">${p.rss_bytes ? bytes(p.rss_bytes) : "unknown"}</div><div class="sub">resident; Go heap ${bytes(p.go_heap_bytes)} of ${bytes(p.go_memory_bytes)}</div></div><div class="card"><div class="k">Goroutines</div><div class="v">${num(p.goroutines)}</div><div class="sub">page connections ${s.http.open_connections}, refused ${count(s.http.refused_connections)}</div></div>` : ""}${c ? h`<div class="card"><div class="k">Connections</div><div class="v">${num(c.flows)}</div><div class="sub">of ${num(c.max)}; ${num(c.offloaded)} on the fast path</div></div>` : ""}${each(s.dhcp_clients, (d) => {
      const until = when(s.time, d.expiry);
      return h`<div class="card"><div class="k">address on ${d.interface}</div><div class="v mono">${valid(d.address) ? d.address : "no lease"}</div><div class="sub">${d.state || "unknown"}${until ? ", until " + until : ""}</div></div>`;
    })}</div>`;
  }
  const rateCell = (cls, b, p, by, pk, extra) => h`<td class="num"><span class="${cls}">${bits(b)}</span><br><span class="sub">${pps(p)}</span><br><span class="sub">${bytes(by)}, ${count(pk)} pkts</span>${extra || ""}</td>`;
  const umemSharing = (u) => (u.shared_with && u.shared_with.length ? "UMEM shared with " + u.shared_with.join(", ") : "UMEM not shared");
  function interfaces(s) {
    return h`<h2>Interfaces</h2><div class="wrap"><table id="ifaces" class="stack"><thead><tr><th>Name</th><th>Port</th><th>State</th><th>Addresses</th><th>MAC</th><th class="num">MTU</th><th class="num">Receiving</th><th class="num">Sending</th><th>Drops</th></tr></thead><tbody>${each(s.interfaces, (i) => h`<tr><td><b>${i.name}</b></td><td class="mono">${i.port}${i.vlan && i.vlan.length ? h`<br><span class="sub">${i.vlan_protocol} vlan ${i.vlan.join(", ")}${i.pcp !== undefined && i.pcp !== null ? " pcp " + i.pcp : ""}</span>` : ""}</td><td><span class="badge ${stateClass(i.state)}" data-iface="${i.name}">${i.state}</span></td><td class="mono addrs">${each(i.addresses, (a, k) => h`${k ? new Raw("<br>") : ""}${a}`, none("none"))}</td><td class="mono">${i.mac}</td><td class="num">${i.mtu}</td>${rateCell("rx", i.rates.rx_bits_per_second, i.rates.rx_packets_per_second, i.rx_bytes, i.rx_packets)}${rateCell("tx", i.rates.tx_bits_per_second, i.rates.tx_packets_per_second, i.tx_bytes, i.tx_packets)}<td class="drops-cell">${drops(i.drops)}</td></tr>`, h`<tr><td colspan="9" class="empty">no interfaces</td></tr>`)}</tbody></table></div>`;
  }
  function ports(s) {
    return h`<h2>Ports</h2><div class="wrap"><table id="ports" class="stack"><thead><tr><th>Name</th><th>State</th><th>MAC</th><th class="num">MTU</th><th class="num">Queues</th><th class="num">Receiving</th><th class="num">Sending</th><th>Drops</th></tr></thead><tbody>${each(s.ports, (p) => h`<tr><td class="mono"><b>${p.name}</b>${p.driver ? h`<br><span class="sub">${p.driver}${p.mode ? ", " + p.mode : ""}</span>` : ""}${p.umem ? h`<br><span class="sub">${umemSharing(p.umem)}</span>` : ""}</td><td><span class="badge ${stateClass(p.state)}" data-port="${p.name}">${p.state}</span></td><td class="mono">${p.mac}</td><td class="num">${p.mtu}</td><td class="num">${p.queues}</td>${rateCell("rx", p.rates.rx_bits_per_second, p.rates.rx_packets_per_second, p.rx_bytes, p.rx_packets)}${rateCell("tx", p.rates.tx_bits_per_second, p.rates.tx_packets_per_second, p.tx_bytes, p.tx_packets, p.umem ? h`<br><span class="sub">${count(p.umem.tx_zero_copy)} zero-copy, ${count(p.umem.tx_copied)} copied</span>` : "")}<td class="drops-cell">${drops(p.drops)}${p.aqm ? h`<br><span class="sub">queue ${p.aqm.on ? "on" : "off"}: ${num(p.aqm.backlog)} waiting, max ${p.aqm.max_sojourn_ms.toFixed(1)} ms; ${count(p.aqm.ecn_marked)} ECN marked, ${count(p.aqm.dropped)} dropped, ${count(p.aqm.overlimit)} over limit</span>` : ""}</td></tr>`, h`<tr><td colspan="8" class="empty">no ports</td></tr>`)}</tbody></table></div>`;
  }
  function routes(s) {
    return h`<h2>Routes</h2><div class="wrap"><table class="narrow"><thead><tr><th>Destination</th><th>Gateway</th><th>Interface</th></tr></thead><tbody>${each(s.routes, (r) => h`<tr><td class="mono">${r.to}</td><td class="mono">${r.via ? r.via : none("on-link")}</td><td class="mono">${r.dev ? r.dev : none("by gateway")}</td></tr>`, h`<tr><td colspan="3" class="empty">no routes</td></tr>`)}</tbody></table></div>`;
  }
  function hostName(s, mac) {
    for (const srv of s.dhcp_servers || []) {
      for (const l of srv.leases || []) if (l.mac === mac && l.hostname) return l.hostname;
    }
    return "";
  }
  function hosts(s) {
    if (!s.neighbors || !s.neighbors.length) return "";
    return h`<h2>Hosts on the networks</h2><div class="wrap"><table id="hosts" class="narrow stack"><thead><tr><th>Interface</th><th>Address</th><th>MAC</th><th>Name</th><th>State</th></tr></thead><tbody>${s.neighbors.map((n) => h`<tr><td>${n.interface}</td><td class="mono">${n.address}</td><td class="mono">${n.mac ? n.mac : none("resolving")}</td><td>${orNone(hostName(s, n.mac))}</td><td>${n.state}</td></tr>`)}</tbody></table></div>`;
  }
  function conntrack(s) {
    const c = s.conntrack;
    if (!c) return "";
    return h`<h2>Connection tracking</h2><div class="wrap"><table class="narrow"><thead><tr><th class="num">Flows</th><th class="num">Assured</th><th class="num">Offloaded</th><th class="num">New flows</th><th class="num">Fast path</th><th>Slow path</th><th>Drops</th></tr></thead><tbody><tr><td class="num">${num(c.flows)}<br><span class="sub">of ${num(c.max)}; the router's ${num(c.router_flows)} (reserve ${num(c.router_reserve)})</span></td><td class="num">${num(c.assured)}</td><td class="num">${num(c.offloaded)}</td><td class="num">${count((c.events || {}).created)}<br><span class="sub">${pps(c.rates.new_flows_per_second)}</span></td><td class="num">${count(c.fastpath_hits)} pkts<br><span class="sub">${percent(c.fastpath_ratio)} hit, ${pps(c.rates.fastpath_packets_per_second)}</span></td><td class="drops-cell">${counts(c.slowpath)}<span class="sub">${pps(c.rates.slowpath_packets_per_second)}</span></td><td class="drops-cell">${drops(c.drops)}</td></tr></tbody></table></div><div class="wrap"><table class="narrow"><thead><tr><th>Protocol</th><th>State</th><th class="num">Flows</th></tr></thead><tbody>${each((c.states || []).filter((f) => f.flows > 0), (f) => h`<tr><td class="mono">${f.proto}</td><td class="mono">${f.state}</td><td class="num">${num(f.flows)}</td></tr>`, h`<tr><td colspan="3" class="empty">no flows</td></tr>`)}</tbody></table></div><h2>NAT ports</h2><div class="wrap"><table class="narrow"><thead><tr><th>External address</th><th>Protocol</th><th class="num">Ports in use</th><th class="num">Flows</th></tr></thead><tbody>${each(c.nat_ports, (p) => h`<tr><td class="mono">${p.address}</td><td class="mono">${p.proto}</td><td class="num">${num(p.ports)}</td><td class="num">${num(p.flows)}</td></tr>`, h`<tr><td colspan="4" class="empty">no mappings</td></tr>`)}</tbody></table></div>`;
  }
  // sqm is the "sqm" template of sqm.go: one row per tin in use.
  const ms = (ns) => fixed((ns || 0) / 1e6, 2) + " ms";
  function sqm(s) {
    if (!s.sqm || !s.sqm.length) return "";
    const rows = s.sqm.map((q) => {
      const st = q.queue || {}, names = q.tin_names || [];
      return (st.tins || []).slice(0, st.num_tins || 0).map((t, i) => h`<tr><td>${q.interface}</td><td>${q.direction}</td><td class="num">${bits(q.rate_bps)}</td><td>${i < names.length ? names[i] : String(i)}</td><td class="num">${ms(t.delay_ns)}</td><td class="num">${ms(t.peak_delay_ns)}</td><td class="num">${count(t.sent_packets)}</td><td class="num">${count(t.codel_drops)}</td><td class="num">${count(t.ecn_marks)}</td><td class="num">${count(t.overlimit_drops)}</td><td class="num">${count(t.backlog_packets)} pkts, ${bytes(t.backlog_bytes || 0)}</td></tr>`);
    });
    return h`<h2>Smart queue management</h2><div class="wrap"><table id="sqm" class="narrow"><thead><tr><th>Interface</th><th>Direction</th><th class="num">Rate</th><th>Tin</th><th class="num">Delay</th><th class="num">Peak delay</th><th class="num">Sent</th><th class="num">CoDel drops</th><th class="num">ECN marks</th><th class="num">Overlimit drops</th><th class="num">Backlog</th></tr></thead><tbody>${rows}</tbody></table></div>${s.sqm.map((q) => { const st = q.queue || {}; return h`<p class="sub">${q.interface} ${q.direction}: at most ${num(st.limit_packets)} packets in ${bytes(Math.max(st.memory_bytes || 0, 0))}; oversize drops ${count(st.oversize_drops)}, write errors ${count(q.write_errors)}</p>`; })}`;
  }
  const row = (k, v, cls) => h`<tr><td>${k}</td><td${cls ? new Raw(` class="${cls}"`) : ""}>${v}</td></tr>`;
  function services(s) {
    const t = s.time;
    const clients = each(s.dhcp_clients, (c) => h`<h2>WAN lease ${c.interface}</h2><div class="wrap"><table class="narrow"><tbody>${row("state", h`<span class="badge ${leaseClass(c.state)}">${c.state || "unknown"}</span>`)}${c.last_error ? row("last error", c.last_error, "drops") : ""}${row("address", orNone(c.address), "mono")}${row("server", orNone(c.server), "mono")}${row("routers", orNone(addrs(c.routers)), "mono")}${row("routes", each(c.routes, (r) => h`<div>${r.dst} ${valid(r.via) && r.via !== "0.0.0.0" ? "via " + r.via : "on-link"}</div>`, none("none")), "mono")}${row("DNS", orNone(addrs(c.dns)), "mono")}${row("domain", orNone(c.domain), "mono")}${row("MTU", c.mtu ? c.mtu : none("none"))}${row("acquired", whenOrNone(t, c.acquired))}${row("renew (T1)", whenOrNone(t, c.renew))}${row("rebind (T2)", whenOrNone(t, c.rebind))}${row("expiry", whenOrNone(t, c.expiry))}${row("events", counts(c.counters), "drops-cell")}${row("drops", drops(c.drops), "drops-cell")}</tbody></table></div>`);
    const servers = each(s.dhcp_servers, (d) => {
      const shown = (d.leases || []).slice(0, 1000), hidden = (d.leases || []).length - shown.length;
      return h`<h2>DHCP leases ${d.interface}</h2><p class="sub">pool ${num(d.pool_used)} of ${num(d.pool_size)} in use${valid(d.pool_start) ? h`, range <span class="mono">${d.pool_start}–${d.pool_end}</span>` : ""}${d.offered ? `, ${num(d.offered)} offered` : ""}${d.declined ? `, ${num(d.declined)} declined` : ""}</p>${d.lease_file_error ? h`<p class="alert">lease file: ${d.lease_file_error}</p>` : ""}<div class="wrap"><table><thead><tr><th>MAC</th><th>Address</th><th>Hostname</th><th>Expiry</th><th>Type</th><th>State</th></tr></thead><tbody>${each(shown, (l) => h`<tr><td class="mono">${l.mac}</td><td class="mono">${l.address}</td><td>${orNone(l.hostname)}</td><td>${whenOrNone(t, l.expiry)}</td><td>${l.static ? "static" : "dynamic"}</td><td>${l.state || "bound"}</td></tr>`, h`<tr><td colspan="6" class="empty">no leases</td></tr>`)}</tbody></table></div>${hidden > 0 ? h`<p class="sub">and ${num(hidden)} more leases (all in <a href="api/status">JSON</a>)</p>` : ""}<div class="wrap"><table class="narrow"><thead><tr><th>Events</th><th>Drops</th></tr></thead><tbody><tr><td class="drops-cell">${counts(d.counters)}</td><td class="drops-cell">${drops(d.drops)}</td></tr></tbody></table></div>`;
    });
    const d = s.dns;
    let dns = "";
    if (d) {
      const total = Object.values(d.queries || {}).reduce((a, b) => a + b, 0);
      const n = d.cache_hits + d.cache_misses;
      const mean = d.latency_count ? d.latency_sum_seconds / d.latency_count : 0;
      dns = h`<h2>DNS</h2><div class="wrap"><table class="narrow fit"><thead><tr><th>Listen</th><th>Upstreams</th><th class="num">Queries</th><th class="num">Cache</th><th class="num">Local answers</th><th class="num">Upstream queries</th><th>Upstream errors</th><th>Drops</th></tr></thead><tbody><tr><td class="mono">${each(d.listen, (l) => h`<div>${l}</div>`, none("none"))}</td><td class="mono">${each(d.upstreams, (u) => h`<div>${u.address} <span class="sub">${u.source}</span></div>`, none("none"))}</td><td class="num">${count(total)}<br><span class="sub">${counterList(d.queries).map(([r, c]) => `${r} ${count(c)}, `)}${qps(d.rates.queries_per_second)}</span></td><td class="num">${percent(n ? d.cache_hits / n : 0)} hit<br><span class="sub">${count(d.cache_hits)} hits, ${count(d.cache_misses)} misses<br>${num(d.cache_entries)}${d.cache_max ? " of " + num(d.cache_max) : ""} entries</span></td><td class="num">${count(d.local_answers)}</td><td class="num">${count(d.upstream_queries)}<br><span class="sub">mean latency ${latency(mean)}, ${num(d.in_flight)} in flight</span></td><td class="drops-cell">${drops(d.upstream_errors)}</td><td class="drops-cell">${drops(d.drops)}</td></tr></tbody></table></div>`;
    }
    return h`${clients}${servers}${dns}`;
  }
  function ipv6(s) {
    const v = s.ipv6, t = s.time;
    if (!v) return "";
    const until = (x) => when(t, x) || "none";
    const d = v.delegation;
    const deleg = d ? h`<h2>IPv6 delegation ${d.interface}</h2><div class="wrap"><table class="narrow"><tbody>${row("state", h`<span class="badge ${leaseClass(d.state)}">${d.state || "unknown"}</span>`)}${d.last_error ? row("last error", d.last_error, "drops") : ""}${row("prefixes", each(d.prefixes, (p) => h`<div>${p.prefix} preferred ${until(p.preferred_until)}, valid ${until(p.valid_until)}</div>`, none("none")), "mono")}${row("address", orNone(d.address), "mono")}${row("server DUID", orNone(d.server_duid), "mono")}${row("our DUID", orNone(d.duid), "mono")}${row("renew (T1)", whenOrNone(t, d.renew))}${row("rebind (T2)", whenOrNone(t, d.rebind))}${row("DNS", orNone(addrs(d.dns)), "mono")}${row("domains", each(d.domains, (x) => h`<div>${x}</div>`, none("none")), "mono")}${row("events", counts(d.counters), "drops-cell")}${row("drops", drops(d.drops), "drops-cell")}</tbody></table></div>` : "";
    const heard = each(v.wan_ra, (l) => h`<h2>IPv6 router advertisements heard on ${l.interface}</h2><div class="wrap"><table class="narrow"><tbody>${row("routers", each(l.routers, (r) => h`<div>${r.address} ${r.mac} ${r.preference}${r.reachability ? " " + r.reachability : ""}, until ${until(r.expires)}</div>`, none("none")), "mono")}${row("prefixes", each(l.prefixes, (p) => h`<div>${p.prefix}${p.on_link ? " on-link" : ""}${p.autonomous ? " autonomous" : ""}, valid until ${until(p.valid_until)}</div>`, none("none")), "mono")}${row("DNS", orNone(addrs((l.rdnss || []).map((x) => x.address))), "mono")}${row("MTU", l.mtu ? l.mtu : none("none"))}${row("events", counts(l.counters), "drops-cell")}${row("drops", drops(l.drops), "drops-cell")}</tbody></table></div>`);
    const sent = each(v.lan_ra, (a) => h`<h2>IPv6 router advertisements sent on ${a.interface}</h2><div class="wrap"><table class="narrow"><tbody>${row("prefixes", each(a.prefixes, (p) => h`<div>${p.prefix}${p.deprecated ? h` <span class="badge down">withdrawn</span>` : ""} preferred until ${until(p.preferred_until)}, valid until ${until(p.valid_until)}</div>`, none("none")), "mono")}${row("flags", a.managed || a.other ? `${a.managed ? "M " : ""}${a.other ? "O" : ""}` : none("none"), "mono")}${row("RDNSS", orNone(addrs(a.rdnss)), "mono")}${row("DNSSL", each(a.dnssl, (x) => h`<div>${x}</div>`, none("none")), "mono")}${row("MTU", a.mtu ? a.mtu : none("none"))}${row("events", counts(a.counters), "drops-cell")}${row("drops", drops(a.drops), "drops-cell")}</tbody></table></div>`);
    const d6 = each(v.dhcpv6_servers, (x) => h`<h2>Stateless DHCPv6 on ${x.interface}</h2><div class="wrap"><table class="narrow"><tbody>${row("DNS", orNone(addrs(x.dns)), "mono")}${row("domains", each(x.domains, (y) => h`<div>${y}</div>`, none("none")), "mono")}${row("events", counts(x.counters), "drops-cell")}${row("drops", drops(x.drops), "drops-cell")}</tbody></table></div>`);
    return h`${deleg}${heard}${sent}${d6}`;
  }
  function macsec(s) {
    const sa = (l) => each(l, (a) => h`<br>${a.an}: PN ${a.next_pn}, state ${a.state}, key ${a.key_id}`);
    return each(s.macsec, (m) => h`<h2>MACsec ${m.name}</h2><div class="wrap"><table class="narrow"><tbody>${row("on", m.on, "mono")}${row("secy", `sci ${m.sci} cipher ${m.cipher} encrypt ${onoff(m.encrypt)} protect ${onoff(m.protect)} send_sci ${onoff(m.send_sci)} end_station ${onoff(m.end_station)} scb ${onoff(m.scb)} replay ${onoff(m.replay)} window ${m.window} validate ${m.validate} encodingsa ${m.encoding_sa}`, "mono")}${row("TXSC", h`${m.sci}${sa(m.tx_sa)}`, "mono")}${each(m.rx_sc, (sc) => row("RXSC", h`${sc.sci}${sa(sc.sa)}`, "mono"))}</tbody></table></div><div class="wrap"><table class="narrow"><thead><tr><th>Scope</th><th>Counters</th></tr></thead><tbody>${row("secy", counters(m.counters), "drops-cell")}${row("tx sc", counters(m.tx_sc), "drops-cell")}${each(m.tx_sa, (a) => row("tx sa " + a.an, counters(a.counters), "drops-cell"))}${each(m.rx_sc, (sc) => h`${row("rx sc " + sc.sci, counters(sc.counters), "drops-cell")}${each(sc.sa, (a) => row("rx sa " + a.an, counters(a.counters), "drops-cell"))}`)}</tbody></table></div>`);
  }
  function internals(s) {
    const dash = new Raw('<td class="num none">-</td>'.repeat(6));
    const ns = s.netstack, f = s.fragments;
    return h`<p class="sub">Counters of the router's own machinery, for debugging a slow or lossy path; the metrics have each of them.</p><div class="wrap"><table><thead><tr><th>Interface</th><th class="wrapth">Receive coalescing</th><th class="num wrapth">Segments merged</th><th class="num wrapth">Packets after merging</th><th class="num wrapth">Forwarded TCP left unmerged</th><th class="num wrapth">Merged packets split on send</th><th class="num wrapth">Checksums checked in software</th><th class="num wrapth">Bad checksums</th><th class="num wrapth">Forwarded straight to a known next hop</th><th class="num wrapth">Frames taken by DHCP</th><th class="num wrapth" title="frames of up to 64 KiB from a local sender with TSO/GSO">Superframes in / sent whole / cut in software</th></tr></thead><tbody>${each(s.interfaces, (i) => {
      const g = i.gro_counters;
      return h`<tr><td><b>${i.name}</b></td><td>${i.gro || "unknown"}</td>${g ? h`<td class="num">${count(g.coalesced)}</td><td class="num">${count(g.flushed)}</td><td class="num">${count(g.bypassed_forward)}</td><td class="num">${count(g.segmented)}</td><td class="num">${count(g.checksum_verified)}</td><td class="num">${count(g.checksum_bad)}</td>` : dash}<td class="num">${count(i.next_hop_forwarded)}</td><td class="num">${count(i.tapped)}</td><td class="num">${count(i.gso_counters.received)} / ${count(i.gso_counters.sent_whole)} / ${count(i.gso_counters.segmented)}</td></tr>`;
    }, h`<tr><td colspan="11" class="empty">no interfaces</td></tr>`)}</tbody></table></div><div class="wrap"><table class="narrow"><tbody>${ns ? h`<tr><td>IP packets into the IP stack (slow path or for the router)</td><td class="num">${count(ns.ip_packets_received)}</td></tr><tr><td>IP packets delivered to the router itself</td><td class="num">${count(ns.ip_packets_delivered)}</td></tr><tr><td>IP packets the IP stack sent</td><td class="num">${count(ns.ip_packets_sent)}</td></tr>` : ""}${f ? h`<tr><td title="fragments refused before NAT (RFC 1858, RFC 5722, RFC 7112) are the interfaces' drops">overlapping and tiny fragments (RFC 5722, RFC 1858)</td><td>fragment guard: ${f.tracked} datagrams tracked, ${count(f.evicted)} evicted early</td></tr>` : ""}<tr><td>status page connections</td><td>${s.http.open_connections} open, ${count(s.http.refused_connections)} refused</td></tr><tr><td title="403: a Host naming none of the router's addresses or names (DNS rebinding), a read of /api or /metrics from another origin">status page requests forbidden</td><td>${count(s.http.forbidden_host)} foreign Host, ${count(s.http.forbidden_origin)} cross-origin</td></tr></tbody></table></div>`;
  }
  function portmap(s) {
    const p = s.port_mapping;
    if (!p) return "";
    const table = {};
    for (const g of ["events", "refused", "errors"]) for (const [k, v] of Object.entries(p[g] || {})) table[g + "/" + k] = v;
    return h`<h2>Port mapping</h2><p class="sub">${(p.protocols || []).join(", ")} on ${(p.listen || []).join(", ")}; mappings on <span class="mono">${p.wan}</span> ${p.external ? h`<span class="mono">${p.external}</span>` : "(no address yet)"}, epoch ${secs(p.epoch)}</p><div class="wrap"><table id="portmap" class="narrow"><thead><tr><th>Owner</th><th>Protocol</th><th class="num">External port</th><th>Internal</th><th>Client</th><th>Description</th><th class="num">Expires in</th></tr></thead><tbody>${each(p.mappings, (m) => h`<tr><td>${m.owner}</td><td class="mono">${m.protocol}</td><td class="num">${m.external}</td><td class="mono">${m.internal}${each(m.peers, (x) => h`<br><span class="sub">peer ${x}</span>`)}</td><td class="mono">${m.client}</td><td>${m.description ? m.description : none("none")}</td><td class="num">${secs(m.remaining_s)}</td></tr>`, h`<tr><td colspan="7" class="empty">no mappings</td></tr>`)}</tbody></table></div><div class="wrap"><table class="narrow"><thead><tr><th>Counters</th><th></th></tr></thead><tbody><tr><td>table</td><td class="drops-cell">${counts(table)}</td></tr>${each(p.servers, (x) => h`<tr><td>${x.name}</td><td class="drops-cell">${counts(x.counters)}</td></tr>`)}</tbody></table></div>`;
  }
  // wireguard is wireguard.go's template.
  function wireguard(s) {
    const events = (w) => Object.fromEntries(Object.entries(w.counters || {}).flatMap(([g, m]) => Object.entries(m || {}).map(([n, v]) => [g + "/" + n, v])));
    const age = (a) => (a < 0 ? "never" : secs(a) + " ago");
    return each(s.wireguard, (w) => h`<h2>WireGuard ${w.name}</h2><div class="wrap"><table class="narrow" data-wg="${w.name}"><thead><tr><th>Peer</th><th>Endpoint</th><th>Allowed IPs</th><th>Last handshake</th><th class="num">Received</th><th class="num">Sent</th></tr></thead><tbody><tr><td>this router</td><td class="mono">port ${w.listen_port}</td><td class="mono">${w.public_key}</td><td></td><td></td><td></td></tr>${each(w.peers, (p) => h`<tr><td>${p.name}</td><td class="mono">${p.endpoint || "none"}</td><td class="mono">${addrs(p.allowed_ips)}</td><td>${age(p.handshake_age_seconds)}</td><td class="num">${bytes(p.rx_bytes)}</td><td class="num">${bytes(p.tx_bytes)}</td></tr>`)}</tbody></table></div><div class="wrap"><table class="narrow"><thead><tr><th>Scope</th><th>Counters</th></tr></thead><tbody><tr><td>${w.name}</td><td class="drops-cell">${counts(events(w))}</td></tr></tbody></table></div>`);
  }

  const SECTIONS = { "s-alerts": alerts, "s-router": router, "s-interfaces": interfaces, "s-ports": ports,
    "s-conntrack": conntrack, "s-sqm": sqm, "s-portmap": portmap, "s-hosts": hosts, "s-services": services, "s-ipv6": ipv6, "s-macsec": macsec,
    "s-wireguard": wireguard, "s-routes": routes, "s-internals": internals };

  // --- graphs ------------------------------------------------------------
  // points holds one entry per sample, oldest first:
  // {seq, t (ms), cpu, ifs: {name: [rxBits, txBits, rxPkts, txPkts]}, ports: {...}}.
  let points = [];
  const rateOf = (r) => [r.rx_bits_per_second, r.tx_bits_per_second, r.rx_packets_per_second, r.tx_packets_per_second];
  function addHistory(hist) {
    const add = (out, src, k) => {
      for (const [name, r] of Object.entries(src || {})) {
        const off = r.first_seq - hist.first_seq;
        for (let j = 0; j < r.rx_bits_per_second.length; j++) {
          const p = out[off + j];
          if (p) p[k][name] = [r.rx_bits_per_second[j], r.tx_bits_per_second[j], r.rx_packets_per_second[j], r.tx_packets_per_second[j]];
        }
      }
    };
    const fresh = hist.times_unix_ms.map((t, j) => ({ seq: hist.first_seq + j, t, cpu: hist.cpu_percent[j], ifs: {}, ports: {} }));
    add(fresh, hist.interfaces, "ifs");
    add(fresh, hist.ports, "ports");
    const last = points.length ? points[points.length - 1].seq : 0;
    points = points.concat(fresh.filter((p) => p.seq > last)).slice(-KEEP);
  }
  function addSample(s) {
    const p = { seq: s.seq, t: Date.parse(s.time), cpu: s.process ? s.process.cpu_percent : 0, ifs: {}, ports: {} };
    for (const i of s.interfaces || []) p.ifs[i.name] = rateOf(i.rates);
    for (const q of s.ports || []) p.ports[q.name] = rateOf(q.rates);
    points.push(p);
    if (points.length > KEEP) points = points.slice(-KEEP);
  }
  const W = 300, H = 64;
  // chart draws two series (rx, tx) of one kind as an SVG with its own
  // scale; the y axis is labelled with its maximum.
  function chart(kind, name, idx, fmt, now) {
    const t0 = now - WINDOW_MS;
    let maxv = 0, n = 0;
    const lines = [idx, idx + 1].map((k) => {
      const pts = [];
      for (const p of points) {
        const v = p[kind][name];
        if (!v || p.t < t0) continue;
        maxv = Math.max(maxv, v[k]);
        pts.push([p.t, v[k]]);
      }
      n = Math.max(n, pts.length);
      return pts;
    });
    const top = maxv > 0 ? maxv * 1.1 : 1;
    const xy = (pts) => pts.map(([t, v]) => `${((t - t0) / WINDOW_MS * W).toFixed(1)},${(H - v / top * (H - 2)).toFixed(1)}`).join(" ");
    return h`<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="${name} ${fmt === bits ? "bits" : "packets"} per second" data-points="${n}"><polyline fill="none" stroke="var(--rx)" stroke-width="1.5" vector-effect="non-scaling-stroke" points="${xy(lines[0])}"/><polyline fill="none" stroke="var(--tx)" stroke-width="1.5" vector-effect="non-scaling-stroke" points="${xy(lines[1])}"/><text x="3" y="11" font-size="10" fill="#656d76">${fmt(maxv)}</text></svg>`;
  }
  function graphs(s) {
    const now = Date.parse(s.time);
    const card = (kind, name, label, r) => h`<div class="graph" data-graph="${kind}:${name}"><h3>${label}</h3>${chart(kind, name, 0, bits, now)}<div class="legend"><span class="rx">in ${bits(r.rx_bits_per_second)}</span><span class="tx">out ${bits(r.tx_bits_per_second)}</span></div>${chart(kind, name, 2, pps, now)}<div class="legend"><span class="rx">in ${pps(r.rx_packets_per_second)}</span><span class="tx">out ${pps(r.tx_packets_per_second)}</span><span>15 min</span></div></div>`;
    return h`${each(s.interfaces, (i) => card("ifs", i.name, `interface ${i.name}`, i.rates))}${each(s.ports, (p) => card("ports", p.name, `port ${p.name}`, p.rates))}`;
  }

  // --- updating ----------------------------------------------------------
  const last = {};
  function set(id, html) {
    const el = document.getElementById(id);
    if (el && last[id] !== html) { el.innerHTML = html; last[id] = html; }
  }
  function render(s) {
    for (const [id, f] of Object.entries(SECTIONS)) set(id, part(f(s)));
    set("graphs", part(graphs(s)));
    const text = (id, v) => { const el = document.getElementById(id); if (el && el.textContent !== v) el.textContent = v; };
    text("version", s.version || "unknown");
    text("build", s.build || "unknown");
    text("uptime", s.started && !s.started.startsWith("0001-01-01") ? uptime(s.uptime_seconds) : "unknown");
    const smp = document.getElementById("sample");
    smp.textContent = ts(s.time);
    smp.dataset.seq = String(s.seq);
    smp.dataset.time = s.time;
    // The sample now drawn, for a test (or a person) to wait on.
    document.documentElement.dataset.rendered = String(s.seq);
  }
  let seq = 0, failing = false;
  const live = document.getElementById("live");
  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  }
  async function poll() {
    try {
      const s = await getJSON("api/status");
      if (s.seq < seq) { points = []; seq = 0; } // the router restarted
      if (s.seq !== seq) {
        if (seq === 0 || s.seq > seq + 1) addHistory(await getJSON("api/history?since=" + seq));
        if (!points.length || points[points.length - 1].seq < s.seq) addSample(s);
        seq = s.seq;
        render(s);
      }
      live.textContent = "live, sample " + s.seq;
      live.className = "";
      failing = false;
    } catch (e) {
      if (!failing) console.warn("status: update failed:", e);
      failing = true;
      live.textContent = "not updating: " + e.message;
      live.className = "stale";
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
