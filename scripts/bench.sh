#!/usr/bin/env bash
# bench.sh builds the router and the lab and runs `gvlab -bench` with the fixed
# settings (iperf3 -t 10 -O 2, one stream and -P 4, both directions, median
# of 5 runs) for (a) the router (NAT: masquerade), (b) kernel forwarding,
# (n) kernel nftables masquerade, (c) the hw port bridge and (d) the kernel
# bridge, all on the same veths; `-bench-modes abncdgmfks` adds (g) the GRO
# modes, (m) RSS with 65,536 flows, (f) the SYN flood and (k) the same
# flood against the kernel's nftables masquerade of (n); (x) and (y) are
# (a) and (c) on AF_XDP ports and (t) and (u) (a) with the AF_PACKET TX
# ring (without and with PACKET_QDISC_BYPASS), so `-bench-modes axtucynd`
# compares both backends in one sitting; `-host-offloads`
# turns TSO/GSO/TX checksum offload on at every lab veth, so the hosts send
# TSO superframes (the "TSO superframes" row: `scripts/bench.sh
# -host-offloads -bench-modes an`), and fails a router run with an
# oversize drop; `-bench-modes q` is the SQM bench: the router behind a
# bloated modem (-bench-sqm 100/20 Mbit/s by default), sqm off and on,
# under an rrul-like load probed by irtt. The output is
# teed to bench-<UTC time>.txt in the module root (or to $BENCH_OUT).
# Extra arguments go to `gvlab` (e.g. -debug). Needs root and iperf3.
#
# --smoke (first argument): a quick run for CI (-t 2, one run each); the
# figures are printed, never gated.
#
# --baseline REV (first argument, or after --smoke): also build git
# revision REV (in a detached worktree of its own) and run it as modes A
# and C, (a) and (c) of that build, taking turns with this build's run by
# run: `scripts/bench.sh --baseline 9cabf24 -bench-modes aAncCd` prints
# (a)/(A) and (c)/(C) from one sitting, free of the drift between two.
set -euo pipefail

secs=10 runs=5 baseline=
if [ "${1:-}" = --smoke ]; then
	shift
	secs=2 runs=1
fi
if [ "${1:-}" = --baseline ]; then
	baseline=${2:?--baseline needs a git revision}
	shift 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "$(id -u)" != 0 ]; then
	echo "bench.sh: needs root (network namespaces)" >&2
	exit 1
fi
for tool in ip iperf3; do
	command -v "$tool" >/dev/null || { echo "bench.sh: needs $tool" >&2; exit 1; }
done

tmp=$(mktemp -d)
cleanup() {
	if [ -n "$baseline" ] && [ -d "$tmp/baseline-src" ]; then
		git -C "$root" worktree remove --force "$tmp/baseline-src" || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
# The version string the status page and `gvrouter version` show (the
# machines build with -buildvcs=false, so there is no VCS stamp).
go build -ldflags "-X main.version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)" -o "$tmp/gvrouter" ./cmd/gvrouter
go build -o "$tmp/gvlab" ./cmd/gvlab
extra=()
if [ -n "$baseline" ]; then
	git -C "$root" worktree add -q --detach "$tmp/baseline-src" "$baseline"
	# Older builds (a baseline) have the appliance's package at cmd/router, since renamed cmd/gvrouter.
	pkg=./cmd/gvrouter
	[ -d "$tmp/baseline-src/cmd/gvrouter" ] || pkg=./cmd/router
	(cd "$tmp/baseline-src" && go build -ldflags "-X main.version=$(git describe --always 2>/dev/null || echo unknown)" -o "$tmp/router-baseline" "$pkg")
	extra=(-bench-baseline "$tmp/router-baseline")
fi

out=${BENCH_OUT:-$root/bench-$(date -u +%Y%m%dT%H%M%SZ).txt}
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo nogit)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)"
	if [ -n "$baseline" ]; then
		echo "# baseline (A, C): $(git -C "$root" rev-parse --short "$baseline")"
	fi
	echo "# $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$tmp/gvlab" -router "$tmp/gvrouter" -bench -bench-seconds "$secs" -bench-runs "$runs" -status-port 0 "${extra[@]}" "$@" 2>&1
} | tee "$out"
echo "bench.sh: output in $out" >&2
