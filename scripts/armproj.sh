#!/usr/bin/env bash
# armproj.sh counts the 32-bit ARM instructions our code executes per
# forwarded frame, for the board projection in docs/arm-projection.md.
#
# It builds the stack package's tests for GOARCH=arm GOARM=7 and runs a
# benchmark under qemu-arm with one trace line per executed instruction
# (-singlestep, called -one-insn-per-tb from qemu 8.1, with -d
# nochain,exec), streamed through a counter and never stored. Each
# benchmark runs with a fixed -benchtime of N1 and N2 frames (multiples of
# the 128-frame batch), and a count per frame is (I(N2) - I(N1)) / (N2 -
# N1): the set-up (netstacks, a TCP handshake and echo, run twice by the
# testing package), the warm-up frame and the single-frame first run are
# the same in both runs and cancel. Three counts per run:
#
#   window  the instructions of the benchmark goroutine inside
#           Endpoint.HandleBatch called from the benchmark loop: our code
#           per frame, the figure the projection uses;
#   region  every instruction of every thread between the benchmark's own
#           b.ResetTimer and b.StopTimer: adds the loop, the frame restore
#           (a copy per frame in the NAT benchmarks) and what the runtime
#           does meanwhile (sysmon, scheduling), which grows with the
#           traced run's wall time, some 500 times the native one;
#   lines   every instruction of the process: adds the set-up's noise (its
#           TCP runs on the wall clock).
#
# The window leaves out excursions: from runtime.morestack (a cooperative
# preemption) or runtime.sigtramp (a signal) until the interrupted
# function runs again. The runs set GOGC=off, GODEBUG=asyncpreemptoff=1
# and GOMAXPROCS=1 (-test.cpu 1), so there are few of them, and
# -stack.slowdown 1000 so that the lab's timeouts survive the tracer. The
# window is also counted per HandleBatch call, which shows how much one
# 128-frame batch differs from the next within a run.
#
# Then the window's instruction mix: each executed address is looked up in
# `go tool objdump` and its ARM encoding classified (loads, stores, LDM/STM,
# branches, barriers, exclusives), for the CPI reasoning of the projection.
#
# A calibration comes first: scripts/armcalib runs a loop of exactly
# 5n+3 instructions (one of them a conditional instruction whose condition
# fails), and the window around it must be exactly that.
#
#   scripts/armproj.sh          calibration, then the benchmarks at N1=256
#                               and N2=2304, twice each, one trace at a
#                               time (~1 h of one core and half of another)
#   scripts/armproj.sh --check  calibration only (~15 s): qemu still gives
#                               one line per executed instruction and the
#                               counter is exact (CI)
#
#   BENCH=chacha scripts/armproj.sh
#                               calibration, then ChaCha20-Poly1305 per
#                               1420-byte WireGuard packet (scripts/armchacha:
#                               each Seal and each Open call counted on its
#                               own, exactly, no N1/N2 difference needed;
#                               ~2 min)
#
# Environment: N1, N2, RUNS (default 2), BENCH (any of nat, ack, transit,
# chacha; default nat, ack and transit; or WAN/DIR/TX, a case of
# BenchmarkPPPoEFastPath such as pppoe/upload/ring: the header push,
# docs/arm-projection.md), QEMU_ARM (default qemu-arm-static), ARMPROJ_KEEP=DIR
# keeps the counter outputs (counts per symbol and address, never the
# trace itself).
set -euo pipefail

check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
fi
n1=${N1:-256} n2=${N2:-2304} runs=${RUNS:-2}
benches=${BENCH:-nat ack transit}
qemu=${QEMU_ARM:-qemu-arm-static}
batch=128 # stack.benchBatch

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v "$qemu" >/dev/null || { echo "armproj.sh: needs $qemu (qemu-user-static)" >&2; exit 1; }
if (( n1 % batch || n2 % batch || n2 <= n1 || n1 == 0 )); then
	echo "armproj.sh: N1 and N2 must be positive multiples of $batch with N2 > N1" >&2
	exit 1
fi
# qemu 8.1 renamed -singlestep (one guest instruction per translation
# block) to -one-insn-per-tb.
if "$qemu" -h 2>&1 | grep -q -- '-one-insn-per-tb'; then
	step=-one-insn-per-tb
else
	step=-singlestep
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# The counter reads qemu's -d exec log: one "Trace CPU: HOSTPTR
# [CS_BASE/PC/FLAGS/CFLAGS] SYMBOL" line per executed translation block
# (in user mode each thread is its own CPU), one instruction per block
# under -singlestep. A block that an exit request stopped before it ran
# is logged as "Stopped execution of TB chain before HOSTPTR [PC] SYMBOL"
# and is run (and logged) again later: its line is taken back.
counter='
function field(t, bits) { return int(bits / t) % 2 }
$1 == "Trace" {
	th = $2; ptr = $3; cur = substr($4, 11, 8)
	sym = substr($0, index($0, "] ") + 2)
	lines++; b = 0
	if (sym == "testing.(*B).ResetTimer" && prev[th] !~ /^testing\./ && !inregion) { inregion = 1; regions++ }
	if (sym == "testing.(*B).StopTimer" && prev[th] !~ /^testing\./) inregion = 0
	if (inregion) { region++; b += 1 }
	if (!inside && sym == callee && prev[th] == caller) { inside = 1; wth = th; calls++; exc = 0; w0 = window }
	if (inside) {
		if (exc && sym == exctarget) { exc = 0; wth = th }
		# Back in the caller, on whichever thread: the benchmark goroutine
		# may have moved to another thread (M) inside the call.
		if (sym == caller) { inside = 0; percall[calls] = window - w0; if (th != wth) exitmoved++ }
		else if (th != wth && !exc && sym ~ /^[a-z]/ && sym ~ /\./ && sym !~ /^(runtime|testing|internal\/|syscall|sync\/atomic)/) {
			# Go code other than the runtime on another thread (not the
			# vdso, whose lines carry no symbol): with GOMAXPROCS=1 only
			# the goroutine that holds the one P runs it, so the window
			# follows it there.
			wth = th; migrations++; window++; win[sym]++; pc[cur]++; b += 8
		}
		else if (th != wth) { other++; b += 2 }
		else if (exc) { exclines++; b += 4 }
		else if (sym == "runtime.morestack" || sym == "runtime.morestack_noctxt" || sym == "runtime.sigtramp") {
			exc = 1; excursions++; exctarget = prev[th]; exclines++; b += 4
		} else { window++; win[sym]++; pc[cur]++; b += 8 }
	}
	pprev[th] = prev[th]; prev[th] = sym; lastptr[th] = ptr; lastb[th] = b; lastsym[th] = sym; lastpc[th] = cur
	next
}
$1 == "Stopped" && $2 == "execution" {
	for (t in lastptr) if (lastptr[t] == $7) {
		aborted++; lines--; b = lastb[t]
		if (field(1, b)) region--
		if (field(2, b)) other--
		if (field(4, b)) exclines--
		if (field(8, b)) { window--; win[lastsym[t]]--; pc[lastpc[t]]-- }
		prev[t] = pprev[t]; lastptr[t] = ""; lastb[t] = 0
		next
	}
	unmatched++
	next
}
{ unknown++ }
END {
	printf "lines %d\naborted %d\nunmatched %d\nunknown %d\nregions %d\nregion %d\n", lines, aborted, unmatched, unknown, regions, region
	printf "calls %d\nwindow %d\nexcursions %d\nexcursion_lines %d\nother_thread_lines %d\nmigrations %d\nexits_elsewhere %d\n", calls, window, excursions, exclines, other, migrations, exitmoved
	for (i = 1; i <= calls; i++) printf "call %d %d\n", i, percall[i]
	for (s in win) if (win[s]) printf "sym %d %s\n", win[s], s
	for (a in pc) if (pc[a]) printf "pc %d %s\n", pc[a], a
}'

# classify reads "COUNT ADDRESS" lines (hex addresses without 0x) and then
# `go tool objdump` output, and prints the instruction mix of those counts
# by ARM encoding (ARM ARM A5.1-A5.7): loads, stores, LDM/STM, branches
# (B, BL, BX, BLX and data processing that writes the PC), barriers
# (DMB/DSB/ISB), exclusives (LDREX/STREX), multiplies, VFP/NEON, the rest
# ALU. lsbeats counts load/store pipeline cycles: one per single transfer,
# one per two registers of an LDM/STM.
classify='
function hexval(h,   i, v) { v = 0; h = tolower(h); for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
function bit(w, n) { return int(w / 2 ^ n) % 2 }
function bits(w, hi, lo) { return int(w / 2 ^ lo) % (2 ^ (hi - lo + 1)) }
function popcount(v,   c) { c = 0; while (v > 0) { c += v % 2; v = int(v / 2) }; return c }
function kind(w,   cond, op, top, rd, dp) {
	cond = bits(w, 31, 28); op = bits(w, 27, 25); beats = 0
	if (cond == 15) {
		top = int(w / 16) * 16
		if (top == 4118802496 || top == 4118802512 || top == 4118802528) return "barrier" # 0xf57ff04x/5x/6x
		if (op == 5) return "branch" # BLX imm
		if (bits(w, 27, 24) == 5 || bits(w, 27, 24) == 7) { beats = 1; return "load" } # PLD, PLI
		return "other"
	}
	if (op == 5) return "branch"
	if (op == 4) { beats = int((popcount(bits(w, 15, 0)) + 1) / 2); return bit(w, 20) ? "ldm" : "stm" }
	if (op == 2 || (op == 3 && !bit(w, 4))) { beats = 1; return bit(w, 20) ? "load" : "store" }
	if (op == 3) return "alu" # media instructions
	if (op == 7 && bit(w, 24)) return "svc"
	if (op == 6 || op == 7) return "vfp"
	if (op == 0 && bits(w, 7, 4) == 9) { if (!bit(w, 24)) return "mul"; beats = 1; return "exclusive" }
	if (op == 0 && bit(w, 7) && bit(w, 4)) {
		beats = 1
		if (!bit(w, 20) && bits(w, 6, 5) == 2) return "load" # LDRD
		return bit(w, 20) ? "load" : "store"
	}
	if (op == 0 && (bits(w, 27, 4) == 1245169 || bits(w, 27, 4) == 1245171)) return "branch" # BX, BLX reg
	rd = bits(w, 15, 12); dp = bits(w, 24, 21)
	if (rd == 15 && (dp < 8 || dp > 11)) return "branch" # writes the PC: a return
	return "alu"
}
FNR == NR { want[$2] += $1; next }
{
	n = split($0, f, "\t")
	for (i = 1; i <= n; i++) if (f[i] ~ /^0x[0-9a-f]+$/) break
	if (i > n) next
	a = substr(f[i], 3); while (length(a) < 8) a = "0" a
	if (!(a in want)) next
	for (j = i + 1; j <= n; j++) if (f[j] ~ /^[0-9a-f]+$/ && length(f[j]) == 8) break
	if (j > n) next
	k = kind(hexval(f[j])); c = want[a]; delete want[a]
	total += c; mix[k] += c; lsbeats += c * beats
}
END {
	left = 0; for (a in want) left += want[a]
	printf "instructions %.1f\n", total
	for (k in mix) printf "class %s %.1f\n", k, mix[k]
	printf "lsbeats %.1f\nunresolved %.1f\n", lsbeats, left
}'

# trace OUT CALLER CALLEE CMD...: runs CMD under qemu in $rundir, its
# trace streamed through the counter into OUT (CMD's own output in
# OUT.log).
rundir=.
trace() {
	local out=$1 caller=$2 callee=$3
	shift 3
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	awk -v caller="$caller" -v callee="$callee" "$counter" <"$tmp/fifo" >"$out" &
	local awk_pid=$!
	pids+=("$awk_pid")
	(cd "$rundir" && GOGC=off GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 exec "$qemu" "$step" -d nochain,exec -D "$tmp/fifo" "$@") >"$out.log" 2>&1 &
	local qemu_pid=$!
	pids+=("$qemu_pid")
	local rc=0
	wait "$qemu_pid" || rc=$?
	wait "$awk_pid"
	if [ "$rc" != 0 ]; then
		echo "armproj.sh: $* exited with $rc:" >&2
		tail -20 "$out.log" >&2
		return 1
	fi
	if [ "$(val "$out" unmatched)" != 0 ] || [ "$(val "$out" unknown)" != 0 ]; then
		echo "armproj.sh: unexpected trace lines in $*: $(grep -E '^(unmatched|unknown) ' "$out" | tr '\n' ' ')" >&2
		return 1
	fi
}

val() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

export CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7
go build -o "$tmp/armcalib" ./scripts/armcalib

echo "qemu: $("$qemu" --version | head -1); $step -d nochain,exec"
echo
echo "calibration: scripts/armcalib runs exactly 5n+3 instructions in main.spin"
for n in 1000 3000; do
	trace "$tmp/calib-$n" main.main main.spin "$tmp/armcalib" "$n"
	want=$((5 * n + 3))
	got=$(val "$tmp/calib-$n" window)
	printf '  n=%-5d window %d (want %d); whole process %d lines, %d aborted blocks taken back\n' \
		"$n" "$got" "$want" "$(val "$tmp/calib-$n" lines)" "$(val "$tmp/calib-$n" aborted)"
	if [ "$got" != "$want" ] || [ "$(val "$tmp/calib-$n" calls)" != 1 ]; then
		echo "armproj.sh: calibration failed: the trace does not give one line per executed instruction" >&2
		exit 1
	fi
done
echo "  whole process, n=3000 minus n=1000: $(( $(val "$tmp/calib-3000" lines) - $(val "$tmp/calib-1000" lines) )) lines for 10000 more instructions in main.spin (the rest is the runtime's other threads, which differ from run to run)"
if [ "$check" = 1 ]; then
	echo "calibration ok"
	exit 0
fi

# measure_chacha: ChaCha20-Poly1305 per 1420-byte packet, the Seal (the
# router encrypting into the tunnel) and the Open (decrypting) each
# counted per call from scripts/armchacha's main.seal and main.open.
measure_chacha() {
	local npk=${CHACHA_PACKETS:-20} aead=golang.org/x/crypto/chacha20poly1305
	go build -o "$tmp/armchacha" ./scripts/armchacha
	echo
	echo "chacha: ChaCha20-Poly1305 (golang.org/x/crypto, pure Go on 32-bit ARM) per 1420-byte packet, $npk packets"
	local op out
	for op in Seal Open; do
		out=$tmp/chacha-$op
		local lc
		lc=$(echo "$op" | tr '[:upper:]' '[:lower:]')
		trace "$out" "main.$lc" "$aead.(*chacha20poly1305).$op" "$tmp/armchacha" "$npk"
		if [ "$(val "$out" calls)" != "$npk" ]; then
			echo "armproj.sh: chacha $op: $(val "$out" calls) calls in the trace, want $npk" >&2
			exit 1
		fi
		# The first call may pay one-time costs (a page fault's worth of
		# runtime); the rest are the steady state.
		awk '$1 == "call" && $2 > 1 { print $3 }' "$out" | sort -n | awk -v op="$op" -v first="$(awk '$1 == "call" && $2 == 1 { print $3 }' "$out")" '
			{ v[NR] = $1; s += $1 }
			END { printf "  %s: %.1f instructions per packet (%d-%d over calls 2-%d; the first %d), %.2f per byte\n", op, s / NR, v[1], v[NR], NR + 1, first, s / NR / 1420
			      printf "%s %.1f\n", op, s / NR >> "'"$tmp/chacha"'" }'
		echo "  where $op goes (per packet, functions over 1 %):"
		awk -v n="$npk" '$1 == "sym" { c[$3] = $2 / n; t += c[$3] } END { for (s in c) if (c[s] >= t / 100) printf "%.1f %s\n", c[s], s }' "$out" |
			sort -rn | sed -e 's#golang.org/x/crypto/##g' | awk '{ printf "    %9.1f  %s\n", $1, $2 }'
		GOARCH= GOOS= go tool objdump "$tmp/armchacha" >"$tmp/armchacha.objdump"
		awk -v n="$npk" '$1 == "pc" { printf "%.4f %s\n", $2 / n, $3 }' "$out" >"$tmp/chacha-$op.pcs"
		awk "$classify" "$tmp/chacha-$op.pcs" "$tmp/armchacha.objdump" | awk '
			$1 == "instructions" { t = $2 } $1 == "class" { k[$2] = $3 } $1 == "lsbeats" { ls = $2 }
			END { for (x in k) printf "    mix %-10s %9.1f  %4.1f %%\n", x, k[x], 100 * k[x] / t; printf "    load/store pipe cycles %.1f per packet\n", ls }' | sort -k3 -rn
	done
	echo
	echo "projection, one Cortex-A9 core at 1.4 GHz, the cipher alone (no Go runtime, netstack or syscalls):"
	awk '{ i[$1] = $2 } END {
		printf "  %-5s %9s %24s %24s %24s\n", "", "instr", "CPI 1.0", "CPI 1.5", "CPI 2.0"
		for (op in i) {
			printf "  %-5s %9.0f", op, i[op]
			for (cpi = 1.0; cpi <= 2.0; cpi += 0.5) { f = 1.4e9 / (cpi * i[op]); printf " %9.0f pkt/s %5.0f Mb/s", f, f * 1420 * 8 / 1e6 }
			printf "\n"
		}
	}' "$tmp/chacha"
}

if [ "$benches" = chacha ]; then
	measure_chacha
	exit 0
fi

go test -c -o "$tmp/stack.test" ./stack
mod=github.com/gvrouter/gvrouter/stack
handle="$mod.(*Endpoint).HandleBatch"
: >"$tmp/results"

# measure NAME BENCH-REGEXP CALLER: N1 and N2 frames, RUNS times.
measure() {
	local name=$1 regexp=$2 caller=$3
	echo
	echo "$name: $regexp, window = Endpoint.HandleBatch called from ${caller#"$mod."}"
	local run n out t0
	for run in $(seq 1 "$runs"); do
		for n in "$n1" "$n2"; do
			out=$tmp/$name-$n-$run
			t0=$SECONDS
			rundir=stack trace "$out" "$caller" "$handle" "$tmp/stack.test" -test.run '^$' -test.bench "$regexp" \
				-test.benchtime "${n}x" -test.cpu 1 -test.benchmem -stack.slowdown 1000
			# The result line may follow a log line of the set-up's
			# netstack on the benchmark's name line: match its figures.
			if ! grep -Eq "^(Benchmark.*)?[[:space:]]+$n[[:space:]]+[0-9.]+ ns/op" "$out.log" || ! grep -q '^PASS' "$out.log"; then
				echo "armproj.sh: $name N=$n did not pass:" >&2
				cat "$out.log" >&2
				exit 1
			fi
			# The last N/128 calls are the timed loop's full batches.
			awk -v n=$((n / batch)) -v c="$(val "$out" calls)" '$1 == "call" && $2 > c - n { print $3 / 128 }' "$out" |
				sort -n | awk -v run="$run" -v n="$n" -v lines="$(val "$out" lines)" -v region="$(val "$out" region)" \
					-v window="$(val "$out" window)" -v exc="$(val "$out" excursions)" -v excl="$(val "$out" excursion_lines)" \
					-v ab="$(val "$out" aborted)" -v mig="$(val "$out" migrations)" -v t=$((SECONDS - t0)) '
					{ v[NR] = $1; s += $1 }
					END { printf "  run %d N=%-5d lines %d region %d window %d; per frame in the loop batches %.1f (%.1f-%.1f over %d batches); excursions %d (%d lines), thread moves %d, aborted blocks %d; %d s\n",
						run, n, lines, region, window, s / NR, v[1], v[NR], NR, exc, excl, mig, ab, t }'
		done
		local a=$tmp/$name-$n1-$run b=$tmp/$name-$n2-$run
		local dcalls=$(( $(val "$b" calls) - $(val "$a" calls) )) want=$(( (n2 - n1) / batch ))
		if [ "$dcalls" != "$want" ]; then
			echo "armproj.sh: $name: $dcalls more HandleBatch calls at N2 than at N1, want $want ($(val "$a" calls) and $(val "$b" calls) calls)" >&2
			exit 1
		fi
		awk -v d=$((n2 - n1)) -v name="$name" -v run="$run" \
			-v w1="$(val "$a" window)" -v w2="$(val "$b" window)" \
			-v r1="$(val "$a" region)" -v r2="$(val "$b" region)" \
			-v l1="$(val "$a" lines)" -v l2="$(val "$b" lines)" 'BEGIN {
			printf "  run %d, (N2 - N1) / %d per frame: window %.1f, region %.1f, lines %.1f instructions\n", run, d, (w2 - w1) / d, (r2 - r1) / d, (l2 - l1) / d
			printf "%s %d %.1f %.1f %.1f\n", name, run, (w2 - w1) / d, (r2 - r1) / d, (l2 - l1) / d >> "'"$tmp/results"'"
		}'
	done
	echo "  where the window goes (run 1, per frame, functions over 1 %):"
	awk -v d=$((n2 - n1)) -v mod="$mod" '
		FNR == NR && $1 == "sym" { a[$3] = $2; next }
		FNR == NR { next }
		$1 == "sym" { c[$3] = ($2 - a[$3]) / d; t += c[$3] }
		END { for (s in c) if (c[s] >= t / 100) printf "%.1f %s\n", c[s], s }
	' "$tmp/$name-$n1-1" "$tmp/$name-$n2-1" | sort -rn |
		sed -e 's#github.com/gvrouter/gvrouter/##g' -e 's#gvisor.dev/gvisor/pkg/##g' | awk '{ printf "    %7.1f  %s\n", $1, $2 }'
	echo "  instruction mix of the window (run 1, per frame):"
	awk -v d=$((n2 - n1)) '
		FNR == NR && $1 == "pc" { a[$3] = $2; next }
		FNR == NR { next }
		$1 == "pc" { printf "%.4f %s\n", ($2 - a[$3]) / d, $3 }
	' "$tmp/$name-$n1-1" "$tmp/$name-$n2-1" >"$tmp/$name.pcs"
	GOARCH= GOOS= go tool objdump "$tmp/stack.test" | awk "$classify" "$tmp/$name.pcs" - | awk '
		$1 == "instructions" { t = $2 } $1 == "class" { k[$2] = $3 } $1 == "lsbeats" { ls = $2 } $1 == "unresolved" { u = $2 }
		END {
			for (x in k) printf "    %-10s %7.1f  %4.1f %%\n", x, k[x], 100 * k[x] / t
			printf "    load/store pipe cycles %.1f per frame, %.2f per instruction (one load/store pipe: a CPI floor); %.1f instructions not found in objdump\n", ls, ls / t, u
		}' | sort -k2 -rn
}

for b in $benches; do
	case $b in
	nat) measure nat '^BenchmarkNATFastPathDispatch$' "$mod.benchNATFastPath" ;;
	ack) measure ack '^BenchmarkNATFastPathACK$' "$mod.benchNATFastPath" ;;
	transit) measure transit '^BenchmarkDispatch$/^forward$/^1514B$' "$mod.BenchmarkDispatch.func4.1" ;;
	# BenchmarkPPPoEFastPath's levels: the wan (plain, pppoe, vlan), the
	# direction (upload, download; vlan's download goes through a trunk,
	# not the window's caller) and the egress writer (copy: a frame that
	# needs a header is copied; ring: it is pushed in the ring's room).
	plain/*/* | pppoe/*/* | vlan/upload/*)
		IFS=/ read -r wan dir tx <<<"$b"
		measure "$wan-$dir-$tx" "^BenchmarkPPPoEFastPath\$/^$wan\$/^$dir\$/^$tx\$" "$mod.benchPPPoEFastPath" ;;
	*) echo "armproj.sh: unknown benchmark $b (nat, ack, transit, or WAN/DIR/TX of BenchmarkPPPoEFastPath: plain|pppoe|vlan / upload|download / copy|ring)" >&2; exit 1 ;;
	esac
done
if [ -n "${ARMPROJ_KEEP:-}" ]; then
	mkdir -p "$ARMPROJ_KEEP"
	for f in "$tmp"/results "$tmp"/*-[0-9]*-[0-9]* "$tmp"/*.pcs; do
		[ -e "$f" ] && cp "$f" "$ARMPROJ_KEEP"/
	done
fi

# Projection: a Cortex-A9 at 1.4 GHz (the BCM47094) running the window's
# instructions per frame at CPI 1.0, 1.5 and 2.0 (docs/arm-projection.md
# says why), in frames/s and, for nat and transit, Mbit/s of the 1500-byte
# IP packets those frames carry.
echo
echo "projection, one Cortex-A9 core at 1.4 GHz, our code only (window, mean of the runs):"
awk '{ s[$1] += $3; k[$1]++ } END {
	printf "  %-8s %7s %26s %26s %26s\n", "", "instr", "CPI 1.0", "CPI 1.5", "CPI 2.0"
	for (b in s) {
		i = s[b] / k[b]
		printf "  %-8s %7.0f", b, i
		for (cpi = 1.0; cpi <= 2.0; cpi += 0.5) {
			f = 1.4e9 / (cpi * i)
			if (b == "ack") printf " %12.0f frames/s %11s", f, ""
			else printf " %12.0f frames/s %5.0f Mb/s", f, f * 1500 * 8 / 1e6
		}
		printf "\n"
	}
}' "$tmp/results"
