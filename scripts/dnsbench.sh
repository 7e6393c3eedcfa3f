#!/usr/bin/env bash
# dnsbench.sh measures cached-answer DNS throughput: dnsperf
# -c 10 -l 10 on a set of cached names against (a) package dnsforward on
# kernel sockets (services/dnsforward/internal/dnsforwardbench) and (b)
# dnsmasq as the forwarder in the same place, taking turns, 5 rounds, and
# prints each median and the ratio a/b.
#
# Topology, three namespaces made here and deleted on exit:
#   client (dnsperf, 10.54.0.2) -- server (the forwarder under test,
#   10.54.0.1 and 10.53.0.2) -- upstream (dnsmasq authoritative for
#   bench.test, 10.53.0.1)
# Each turn starts its forwarder, fills its cache with one pass over the
# names, then measures. Needs root, ip, dnsmasq, dnsperf and dig
# (Debian: iproute2 dnsmasq dnsperf bind9-dnsutils).
#
# --smoke (first argument): -l 2 and one round, for CI; figures printed,
# never gated. BENCH_OUT=FILE also writes the output there.
#
# --router (after --smoke, if both): (a) is the whole router instead,
# `gvrouter run` in the server namespace owning both veths (AF_PACKET, the
# forwarder in netstack on 10.54.0.1, upstream 10.53.0.1 by dns.upstreams),
# against dnsmasq in its place: the kernel holds the two addresses only
# during dnsmasq's turns. Needs ethtool too (wire-like offloads: the router
# reads frames below the kernel, so checksums must be complete).
set -euo pipefail

secs=10 rounds=5 clients=10 names=100 drops=
if [ "${1:-}" = --smoke ]; then
	shift
	secs=2 rounds=1
fi
mine=dnsforward
if [ "${1:-}" = --router ]; then
	shift
	mine=router
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "$(id -u)" != 0 ]; then
	echo "dnsbench.sh: needs root (network namespaces)" >&2
	exit 1
fi
for tool in ip dnsmasq dnsperf dig; do
	command -v "$tool" >/dev/null || { echo "dnsbench.sh: needs $tool" >&2; exit 1; }
done

tmp=$(mktemp -d)
ns_cl=dnsb-$$-cl ns_srv=dnsb-$$-srv ns_up=dnsb-$$-up
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for n in "$ns_cl" "$ns_srv" "$ns_up"; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/dnsforwardbench" ./services/dnsforward/internal/dnsforwardbench
if [ "$mine" = router ]; then
	command -v ethtool >/dev/null || { echo "dnsbench.sh: --router needs ethtool" >&2; exit 1; }
	go build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo unknown)" -o "$tmp/router" ./cmd/gvrouter
	cat >"$tmp/router.yaml" <<EOF
hardware: generic
ports: [{name: s1}, {name: s0}]
interfaces:
  - {name: lan, port: s1, addresses: [10.54.0.1/24], role: lan}
  - {name: wan, port: s0, addresses: [10.53.0.2/24], role: wan}
dns:
  upstreams: [10.53.0.1]
  cache: {size: 10000}
status: {listen: ["127.0.0.1:9053"]}
state_dir: $tmp/state
EOF
fi

for n in "$ns_cl" "$ns_srv" "$ns_up"; do
	ip netns add "$n"
	ip -n "$n" link set lo up
	ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n "$ns_up" link add u0 type veth peer name s0 netns "$ns_srv"
ip -n "$ns_srv" link add s1 type veth peer name c0 netns "$ns_cl"
ip -n "$ns_up" addr add 10.53.0.1/24 dev u0
ip -n "$ns_srv" addr add 10.53.0.2/24 dev s0
ip -n "$ns_srv" addr add 10.54.0.1/24 dev s1
ip -n "$ns_cl" addr add 10.54.0.2/24 dev c0
ip -n "$ns_up" link set u0 up
ip -n "$ns_srv" link set s0 up
ip -n "$ns_srv" link set s1 up
ip -n "$ns_cl" link set c0 up
if [ "$mine" = router ]; then
	for p in "$ns_up u0" "$ns_srv s0" "$ns_srv s1" "$ns_cl c0"; do
		set -- $p
		ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off >/dev/null 2>&1 || true
	done
fi

# The upstream: dnsmasq authoritative for bench.test, TTL an hour, so
# every answer stays cached for the whole run.
records=()
: >"$tmp/queries"
for i in $(seq 1 "$names"); do
	records+=("--host-record=h$i.bench.test,192.0.2.$((i % 250 + 1))")
	echo "h$i.bench.test A" >>"$tmp/queries"
done
ip netns exec "$ns_up" dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --pid-file= \
	--listen-address=10.53.0.1 --bind-interfaces --port=53 \
	--auth-zone=bench.test --auth-server=ns.bench.test,u0 --auth-ttl=3600 \
	--auth-soa=1,hostmaster.bench.test,1200,120,604800 "${records[@]}" 2>"$tmp/upstream.log" &
pids+=($!)

ready() { # ready NAME: wait until 10.54.0.1 answers NAME
	for _ in $(seq 1 100); do
		if ip netns exec "$ns_cl" dig +tries=1 +time=1 +short @10.54.0.1 "$1" A 2>/dev/null | grep -q '^192\.0\.2\.'; then
			return 0
		fi
		sleep 0.1
	done
	echo "dnsbench.sh: no answer for $1 from 10.54.0.1" >&2
	return 1
}

start_forwarder() { # start_forwarder KIND: start it in the server namespace; sets fwd_pid
	case $1 in
	dnsforward)
		ip netns exec "$ns_srv" "$tmp/dnsforwardbench" -listen 10.54.0.1:53 -upstream 10.53.0.1:53 \
			>"$tmp/dnsforward.status" 2>"$tmp/dnsforward.log" &
		;;
	router)
		ip -n "$ns_srv" addr flush dev s0
		ip -n "$ns_srv" addr flush dev s1
		ip netns exec "$ns_srv" "$tmp/router" run -config "$tmp/router.yaml" -run-dir "$tmp/run" ${DNSBENCH_ROUTER_ARGS:-} \
			>"$tmp/router.log" 2>&1 &
		;;
	dnsmasq)
		if [ "$mine" = router ]; then # the addresses are the kernel's again
			ip -n "$ns_srv" addr replace 10.53.0.2/24 dev s0
			ip -n "$ns_srv" addr replace 10.54.0.1/24 dev s1
		fi
		ip netns exec "$ns_srv" dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --pid-file= \
			--server=10.53.0.1 --listen-address=10.54.0.1 --bind-interfaces --port=53 --cache-size=10000 \
			2>"$tmp/dnsmasq.log" &
		;;
	esac
	fwd_pid=$!
	pids+=("$fwd_pid")
}

stop_forwarder() {
	kill "$fwd_pid" 2>/dev/null || true
	wait "$fwd_pid" 2>/dev/null || true
}

turn() { # turn KIND: one measurement; sets qps and lost
	start_forwarder "$1"
	ready h1.bench.test
	# Fill the cache: one pass over the names.
	ip netns exec "$ns_cl" dnsperf -s 10.54.0.1 -d "$tmp/queries" -n 1 >/dev/null
	ip netns exec "$ns_cl" dnsperf -s 10.54.0.1 -d "$tmp/queries" -c "$clients" -l "$secs" >"$tmp/$1.perf"
	if [ "$1" = router ]; then # where lost queries went
		drops=$(ip netns exec "$ns_srv" curl -s http://127.0.0.1:9053/api/status |
			jq -c '{nat: (.conntrack.drops // {} | with_entries(select(.value > 0))), dns: .dns.drops, dns_queries: .dns.queries, ports: [.ports[] | {(.name): (.drops | with_entries(select(.value > 0)))}], ifaces: [.interfaces[] | {(.name): (.drops | with_entries(select(.value > 0)))}]}' 2>/dev/null || echo "?")
	fi
	stop_forwarder
	qps=$(awk '/Queries per second:/ {print $4}' "$tmp/$1.perf")
	lost=$(awk '/Queries lost:/ {print $3}' "$tmp/$1.perf")
}

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

exec > >(tee "${BENCH_OUT:-/dev/null}")
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo nogit)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)"
echo "# $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3), $(dnsmasq --version | head -1 | cut -d' ' -f1-3), dnsperf $(dpkg-query -W -f '${Version}' dnsperf 2>/dev/null || echo "?")"
if [ "$mine" = router ]; then
	echo "# dnsperf -c $clients -l $secs, $names cached names, $rounds rounds, the router (netstack) vs dnsmasq (kernel)"
else
	echo "# dnsperf -c $clients -l $secs, $names cached names, $rounds rounds, kernel sockets"
fi
a=() b=()
for r in $(seq 1 "$rounds"); do
	# Take turns, and swap who goes first each round.
	if [ $((r % 2)) = 1 ]; then order="$mine dnsmasq"; else order="dnsmasq $mine"; fi
	for kind in $order; do
		turn "$kind"
		echo "round $r $kind: $qps queries/s ($lost lost)${drops:+; router drops $drops}"
		drops=
		if [ "$kind" = "$mine" ]; then a+=("$qps"); else b+=("$qps"); fi
	done
done
ma=$(printf '%s\n' "${a[@]}" | median)
mb=$(printf '%s\n' "${b[@]}" | median)
echo "median $mine: $ma queries/s"
echo "median dnsmasq:    $mb queries/s"
awk -v a="$ma" -v b="$mb" -v m="$mine" 'BEGIN {printf "ratio %s/dnsmasq: %.2f\n", m, a / b}'
if [ "$mine" = dnsforward ]; then
	echo "dnsforward status of the last turn: $(cat "$tmp/dnsforward.status")"
fi
