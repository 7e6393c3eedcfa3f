#!/usr/bin/env bash
# ab-lab.sh: compare router builds on one kept lab, run by run, with router
# CPU per Gbit beside the throughput. Where `gvlab -bench` sets up a
# lab per run, this keeps one (`gvlab -keep`) and swaps only the
# router binary, so the hosts, their sockets and the namespaces stay the
# same between the builds compared; it is how the vnet-header question of
# docs/performance.md ("Issue 21's last point") was measured.
#
#   gvlab -keep &           # note its id, e.g. gvl20677
#   scripts/ab-lab.sh gvl20677 7 /tmp/router-head /tmp/router-parent [/tmp/router-x ...]
#
# Per round and build: start the build in the lab's router namespace on
# the lab's own config (after stopping the lab's router, a process this
# script's caller started), wait for the NAT path (a LAN→WAN ping), run
# iperf3 -t SECS (default 6) -P 1, -P 1 -R, -P 4, -P 4 -R from the LAN
# host to an iperf3 server this script starts on the WAN host, stop the
# build. Prints one line per round and build ("Mbit/s/CPU ms per Gbit"
# per cell), then the medians and the first build's ratios to the others.
# Give the same binary twice (copied under another name) for an A/A
# control: the spread of its ratio is the resolution of the sitting.
# Offloads go off on every lab veth, as in the bench.
set -eu
id=${1:?lab id (gvlNNNN)}
rounds=${2:?rounds}
shift 2
[ $# -ge 2 ] || { echo "ab-lab.sh: give two or more router binaries" >&2; exit 2; }
rtr=$id-rtr lan=$id-lan wan=$id-wan dir=/run/gvrouter-lab/$id
secs=${SECS:-6}
port=${PORT:-5301}
out=${OUT:-$(mktemp /tmp/ab-lab.XXXXXX)}
[ -f "$dir/lab.yaml" ] || { echo "ab-lab.sh: no lab $id ($dir/lab.yaml)" >&2; exit 2; }

# The lab's own router: stop it (the lab keeps the namespaces and hosts).
if old=$(ip netns pids "$rtr" | head -1) && [ -n "$old" ]; then
	kill "$old"
	while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
fi
for ns in $lan $wan; do ip netns exec "$ns" ethtool -K eth0 tso off gso off gro off tx off >/dev/null 2>&1 || true; done
for d in lan0 wan0; do ip netns exec "$rtr" ethtool -K $d tso off gso off gro off tx off >/dev/null 2>&1 || true; done

ip netns exec "$wan" iperf3 -s -p "$port" >/dev/null 2>&1 &
srv=$!
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	kill "$srv" 2>/dev/null
}
trap cleanup EXIT

for r in $(seq 1 "$rounds"); do
	for bin in "$@"; do
		ip netns exec "$rtr" "$bin" run -config "$dir/lab.yaml" -run-dir "$dir/run-ab" >"$out.router.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 100); do
			ip netns exec "$lan" ping -c1 -W1 10.77.2.2 >/dev/null 2>&1 && break
			sleep 0.3
		done
		sleep 1
		line="$(basename "$bin") r$r"
		for args in "-P 1" "-P 1 -R" "-P 4" "-P 4 -R"; do
			t0=$(awk '{print $14+$15}' /proc/$pid/stat)
			# shellcheck disable=SC2086
			json=$(ip netns exec "$lan" iperf3 -c 10.77.2.2 -p "$port" -t "$secs" $args -J 2>/dev/null || true)
			t1=$(awk '{print $14+$15}' /proc/$pid/stat)
			line="$line $(printf '%s' "$json" | python3 -c '
import json, sys
ticks, secs, hz = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
try:
    bps = json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]
except Exception:
    bps = 0
print("%d/%d" % (bps / 1e6, ticks * 1000 / hz / (bps * secs / 1e9) if bps else 0))
' $((t1 - t0)) "$secs" "$(getconf CLK_TCK)")"
		done
		echo "$line" | tee -a "$out"
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		pid=
	done
done

python3 - "$out" <<'EOF'
import collections, statistics as st, sys
mb = collections.defaultdict(lambda: [[] for _ in range(4)])
cpu = collections.defaultdict(lambda: [[] for _ in range(4)])
order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 6 or not f[1].startswith("r"):
        continue
    if f[0] not in order:
        order.append(f[0])
    for i, cell in enumerate(f[2:]):
        m, c = (int(x) for x in cell.split("/"))
        if m > 0:
            mb[f[0]][i].append(m)
            cpu[f[0]][i].append(c)
cells = ["-P 1 L→W", "-P 1 W→L", "-P 4 L→W", "-P 4 W→L"]
med = lambda xs: st.median(xs) if xs else float("nan")
print("median Mbit/s, CPU ms/Gbit".ljust(28) + "".join(c.rjust(16) for c in cells))
for b in order:
    print(b.ljust(28) + "".join(("%6d %5d" % (med(mb[b][i]), med(cpu[b][i]))).rjust(16) for i in range(4)) + "  runs %d" % len(mb[b][0]))
for b in order[1:]:
    r = [med(mb[order[0]][i]) / med(mb[b][i]) for i in range(4)]
    c = [med(cpu[order[0]][i]) / med(cpu[b][i]) for i in range(4)]
    print(("%s/%s" % (order[0], b)).ljust(28) + "".join(("%.2f" % x).rjust(16) for x in r))
    print("  CPU per bit".ljust(28) + "".join(("%.2f" % x).rjust(16) for x in c))
EOF
