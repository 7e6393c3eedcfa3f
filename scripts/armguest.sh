#!/bin/bash
# The board in a box (docs/arm-projection.md): an instruction-clocked
# 32-bit ARM guest, qemu-system-arm -M virt -cpu cortex-a15 with one vCPU
# and -icount shift=0,sleep=off, so that the guest's clock advances 1 ns
# per executed instruction and every Mbit/s it measures is Mbit/s per
# GIPS of the whole system (kernel, both iperf3 ends, the router).
# Inside it: Debian 12's armhf kernel (8021q, veth, nf_tables, macsec),
# a busybox initramfs with Debian's armhf iperf3, ip, nft and ethtool,
# and the router's GOARCH=arm GOARM=7 binary. The guest's /init
# (scripts/armguest/init) builds the board's topology and measures:
#   lan ns --veth trunk (VLAN 1 and 2)-- router ns eth0: eth0.1, eth0.2 --> wan ns
#   armguest.sh            # the full run (~15 min): hosts alone, kernel NAT GRO on/off, router, MACsec,
#                          # with the payload plugin (scripts/armguest/payload.c) and the board model
#   armguest.sh --smoke    # CI: one short kernel NAT case (~2 min), no plugin
#   armguest.sh prepare    # only build the cached image
# Environment: ARMGUEST_SECS (iperf3 seconds of guest time per case),
# ARMGUEST_CASES (space-separated: direct gro-on gro-off gro-on-ctcsum
# gro-off-ctcsum gro-on-txoff gro-off-txoff gro-on-rxcsum router
# router-af_packet router-af_xdp router-aqm-on router-aqm-off (the receive queue) router-ring router-ring-bypass (the af_packet
# TX ring, without and with PACKET_QDISC_BYPASS) router-sys[-DRIVER] (the router's system
# calls counted) macsec-kernel macsec-router[-DRIVER]),
# ARMGUEST_PAYLOAD (1: load the plugin), ARMGUEST_CPI, ARMGUEST_GHZ,
# ARMGUEST_LINE_NS, ARMGUEST_HDR_LINES (the board model's parameters),
# ARMGUEST_KEEP=DIR (keep the guest's console and the plugin's log there),
# ARMGUEST_PROF=1 (the plugin also profiles by kernel function),
# ARMGUEST_KPROBE="func arg=%rN" (router-sys cases: a kprobe's hits by kernel stack),
# ARMGUEST_HOSTNICE (the iperf3 ends' nice, default 19: a waking host then does not preempt the
# router, as on the board, which runs no iperf3; 0 for the figures before 2026-12-07 21:00),
# ARMGUEST_APPEND (more kernel command line, e.g. init_on_alloc=0).
set -euo pipefail
cd "$(dirname "$0")/.."
# CACHE holds one image per layout version: bump the suffix when the
# initramfs's contents change, so that no stale image is reused.
CACHE=${ARMGUEST_CACHE:-/var/tmp/gvrouter-armguest/v1}
log() { echo "armguest: $*" >&2; }

# Host tools; the guest's own files are armhf packages downloaded, not installed.
PKGS="qemu-system-arm cpio kmod binutils"
# The guest's programs: their libraries come from the closure walk below.
TOOLS="iperf3 iproute2 nftables ethtool"
MODULES="veth 8021q nft_masq nft_chain_nat nf_conntrack macsec gcm ghash-generic ctr aes-arm"

need_pkgs() {	# install the Debian packages that are missing
	local miss=() p
	for p; do dpkg -s "$p" >/dev/null 2>&1 || miss+=("$p"); done
	[ ${#miss[@]} -eq 0 ] ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${miss[@]}" >&2
}

need_armhf() {	# the armhf architecture in dpkg and apt's lists
	if ! dpkg --print-foreign-architectures | grep -qx armhf; then
		dpkg --add-architecture armhf
	fi
	apt-cache show libc6:armhf >/dev/null 2>&1 || apt-get update -qq >&2
}

# lib_closure prints the armhf library packages (lib*, zlib1g) that $TOOLS
# depend on, transitively; the binaries' NEEDED walk later takes from
# them only the shared objects actually loaded.
lib_closure() {
	# shellcheck disable=SC2046
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances $(printf '%s:armhf ' $TOOLS) 2>/dev/null |
		awk '/^(lib[^ ]*|zlib1g):armhf$/ && !/^libperl/ { print }' | sort -u
}

# copy_needed copies the shared objects that the ELF files $@ (in $x)
# need, transitively, from the extracted tree $x to the initramfs $r,
# with the armhf loader. A soname found nowhere fails the build.
copy_needed() {
	local todo=("$@") f so p seen=" "
	while [ ${#todo[@]} -gt 0 ]; do
		f=${todo[0]}; todo=("${todo[@]:1}")
		for so in $(readelf -d "$x/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			case $seen in *" $so "*) continue ;; esac
			seen="$seen$so "
			p=$(cd "$x" && find lib usr/lib -name "$so" \( -type f -o -type l \) 2>/dev/null | head -1)
			[ -n "$p" ] || { log "no armhf package in the closure has $so (needed by $f)"; exit 1; }
			mkdir -p "$r/lib"
			cp -L "$x/$p" "$r/lib/$so"
			todo+=("$p")
		done
	done
	cp -L "$x/lib/ld-linux-armhf.so.3" "$r/lib/"
}

prepare() {	# once: $CACHE/kernel + $CACHE/base.cpio
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ -s "$CACHE/kernel" ] && [ -s "$CACHE/base.cpio" ]; then
		return
	fi
	# shellcheck disable=SC2086
	need_pkgs $PKGS
	need_armhf
	log "building the guest image in $CACHE (once)"
	local k b m d
	t=$(mktemp -d "$CACHE/build.XXXXXX")
	trap 'rm -rf "$t"' EXIT
	x=$t/x r=$t/root
	mkdir -p "$x" "$t/deb" "$r"/{bin,sbin,dev,proc,sys,tmp,run,lib/modules}
	b=$(apt-cache depends linux-image-armmp:armhf | awk '/Depends: linux-image-/ { sub(/:armhf$/, "", $2); print $2; exit }')
	[ -n "$b" ] || { log "apt-cache knows no linux-image-armmp:armhf"; exit 1; }
	k=${b#linux-image-}
	# shellcheck disable=SC2046
	(cd "$t/deb" && apt-get download -o APT::Sandbox::User=root "$b:armhf" busybox-static:armhf \
		$(printf '%s:armhf ' $TOOLS) $(lib_closure) >&2)
	for d in "$t"/deb/*.deb; do dpkg-deb -x "$d" "$x"; done
	# Debian 12 is merged-/usr: the packages ship /lib and /usr/lib apart.
	depmod -b "$x" "$k"
	# busybox is armhf: /init installs its applet links in the guest.
	cp "$x/bin/busybox" "$r/bin/busybox"
	ln -s busybox "$r/bin/sh"
	cp "$x/usr/bin/iperf3" "$x/bin/ip" "$x/usr/sbin/nft" "$x/sbin/ethtool" "$r/sbin/"
	copy_needed usr/bin/iperf3 bin/ip usr/sbin/nft sbin/ethtool
	for m in $MODULES; do
		modprobe -d "$x" -S "$k" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r m; do
		cp "$m" "$r/lib/modules/"
		echo "${m##*/}" >>"$r/lib/modules/order"
	done
	cp scripts/armguest/init "$r/init"
	chmod +x "$r/init"
	(cd "$r" && find . | cpio -o -H newc --quiet) >"$CACHE/base.cpio.tmp"
	cp "$x/boot/vmlinuz-$k" "$CACHE/kernel.tmp"
	echo "$k" >"$CACHE/version"
	mv "$CACHE/kernel.tmp" "$CACHE/kernel"
	mv "$CACHE/base.cpio.tmp" "$CACHE/base.cpio"
	rm -rf "$t"
	trap - EXIT
	log "guest kernel $k, initramfs $(du -h "$CACHE/base.cpio" | cut -f1)"
}

# job_cpio writes the per-run part of the initramfs to $1: the router's
# ARM binary, the guest's /init (so an edit needs no image rebuild) and
# /job.env.
job_cpio() {
	local j
	j=$(mktemp -d /tmp/armguest-job.XXXXXX)
	mkdir -p "$j/sbin"
	if [ -n "$PROF" ]; then
		# with its symbols, which prof_report reads from this copy
		CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go build -trimpath -o "$j/sbin/router" ./cmd/gvrouter
		cp "$j/sbin/router" "$ROUTER_SYMS"
	else
		CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go build -trimpath -ldflags "-s -w" -o "$j/sbin/router" ./cmd/gvrouter
	fi
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go build -trimpath -ldflags "-s -w" -o "$j/sbin/badcsum" ./scripts/armguest/badcsum
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go build -trimpath -ldflags "-s -w" -o "$j/sbin/mark" ./scripts/armguest/mark
	cp scripts/armguest/init "$j/init"
	chmod +x "$j/init"
	cat >"$j/job.env" <<EOF
SECS=${SECS}
CASES="${CASES}"
PROF=${PROF:-0}
KPROBE="${ARMGUEST_KPROBE:-}"
HOSTNICE=${ARMGUEST_HOSTNICE:-19}
EOF
	(cd "$j" && find . | cpio -o -H newc --quiet) >"$1"
	rm -rf "$j"
}

# plugin_build writes the payload plugin (scripts/armguest/payload.c) to
# $1. Its header, qemu-plugin.h, is taken from Debian's source package of
# the installed qemu-system-arm (the binary package ships none), fetched
# once into $CACHE through a private deb-src copy of apt's own sources.
plugin_build() {
	local h=$CACHE/qemu-plugin.h t v f o
	if [ ! -s "$h" ]; then
		need_pkgs gcc xz-utils
		v=$(dpkg-query -W -f '${source:Version}' qemu-system-arm)
		t=$(mktemp -d)
		mkdir -p "$t/parts" "$t/lists/partial"
		for f in /etc/apt/sources.list.d/*.sources; do
			[ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$t/parts/${f##*/}"
		done
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -f "$f" ] && sed -n 's/^deb /deb-src /p' "$f"
		done >"$t/parts/plain.list"
		o=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$t/parts" -o Dir::State::Lists="$t/lists")
		apt-get "${o[@]}" update -qq >&2 || true
		(cd "$t" && apt-get "${o[@]}" -o APT::Sandbox::User=root source --download-only "qemu=$v" >&2)
		tar -xJf "$t"/qemu_*.orig.tar.xz -O --wildcards '*/include/qemu/qemu-plugin.h' >"$h.tmp"
		mv "$h.tmp" "$h"
		rm -rf "$t"
	fi
	gcc -O2 -Wall -shared -fPIC -I"$CACHE" -o "$1" scripts/armguest/payload.c
}

# boot_guest OUT CASES [QEMU-ARGS...]: one guest run, its console in OUT.
boot_guest() {
	local out=$1 cases=$2 job
	shift 2
	job=$(mktemp /tmp/armguest-job.XXXXXX.cpio)
	CASES=$cases job_cpio "$job"
	cat "$CACHE/base.cpio" "$job" >"$job.all"
	# One vCPU: with two and -icount the boot stalls after CPU1 comes up.
	timeout "${ARMGUEST_TIMEOUT:-1500}" qemu-system-arm -M virt -cpu cortex-a15 -smp 1 -m 512 \
		-icount shift=0,sleep=off -nographic -no-reboot -nic none \
		-kernel "$CACHE/kernel" -initrd "$job.all" "$@" \
		-append "console=ttyAMA0 quiet panic=-1${ARMGUEST_APPEND:+ $ARMGUEST_APPEND}" </dev/null | tee "$out" | grep --line-buffered -E '^(AG|\+ )' | grep --line-buffered -Ev '^AG (SYM|KALL) ' >&2 || true
	rm -f "$job" "$job.all"
}

run_guest() {
	local out start plog="" so="" syms="" args=()
	out=$(mktemp /tmp/armguest-out.XXXXXX)
	if [ "$PAYLOAD" = 1 ]; then
		so=$(mktemp /tmp/armguest-payload.XXXXXX.so)
		plugin_build "$so"
		# the addresses, cached per list of names (the init's awk)
		syms=$CACHE/syms.$(sed -n '/^awk .$/,/kallsyms$/p' scripts/armguest/init | sha256sum | cut -c1-12)
		if [ ! -s "$syms" ]; then
			log "one boot for the kernel's symbols (payload plugin)"
			boot_guest "$out" ""
			grep '^AG SYM ' "$out" >"$syms.tmp"
			[ -s "$syms.tmp" ] || { log "the guest printed no symbols (output in $out)"; exit 1; }
			mv "$syms.tmp" "$syms"
		fi
		sed 's/^AG SYM //' "$syms" >"$so.syms"
		plog=$(mktemp /tmp/armguest-plugin.XXXXXX)
		args=(-plugin "$so,syms=$so.syms${PROF:+,prof=1}" -d plugin -D "$plog")
	fi
	log "booting the guest (kernel $(cat "$CACHE/version"), cases: $CASES, ${SECS}s each${so:+, payload plugin})"
	start=$(date +%s)
	boot_guest "$out" "$CASES" "${args[@]}"
	log "guest done in $(( $(date +%s) - start ))s of host time"
	if [ -n "${ARMGUEST_KEEP:-}" ]; then
		mkdir -p "$ARMGUEST_KEEP"
		cp "$out" "$ARMGUEST_KEEP/console"
		[ -z "$plog" ] || cp "$plog" "$ARMGUEST_KEEP/plugin"
	fi
	report "$out" "$plog"
	grep -q '^AG DONE rc=0' "$out" || { log "the guest did not finish cleanly (output in $out)"; exit 1; }
	if [ -n "$so" ]; then
		# the plugin's addresses must be the ones this boot printed
		grep '^AG SYM ' "$out" | cmp -s - "$syms" ||
			{ log "the kernel's symbols moved: remove $syms and run again"; exit 1; }
		rm -f "$so" "$so.syms" "$plog"
	fi
	rm -f "$out"
}

# report prints the table from the guest's "AG RESULT" lines.
report() {
	echo
	grep '^AG CHECK ' "$1" | sed 's/^AG CHECK /check: /' || true
	printf '%-15s %12s %12s %12s %10s %5s  %s\n' case "Mbit/s/GIPS" "instr/frame" "board share" frames idle note
	awk '/^AG RESULT / {
		delete kv; for (i = 3; i <= NF; i++) { p = index($i, "="); kv[substr($i, 1, p - 1)] = substr($i, p + 1) }
		c = $3; n[++cases] = c; m[c] = kv["mbps"]; fr[c] = kv["frames"]; note[c] = kv["note"]; idle[c] = kv["idle"]
		ipf[c] = kv["frames"] > 0 ? kv["ms"] * 1e6 / kv["frames"] : 0
	}
	END {
		for (i = 1; i <= cases; i++) {
			c = n[i]
			share = ("direct" in ipf) && c != "direct" ? sprintf("%.0f", ipf[c] - ipf["direct"]) : "-"
			printf "%-15s %12.1f %12.0f %12s %10d %5s  %s\n", c, m[c], ipf[c], share, fr[c], idle[c], note[c]
		}
		print "(Mbit/s/GIPS: iperf3 LAN->WAN in the icount guest, whole system; instr/frame: guest ns / LAN frames;"
		print " board share: instr/frame minus the hosts-only case, the board'"'"'s own instructions per frame;"
		print " idle: guest CPU idle, time the icount clock skipped with no instruction run)"
		if (m["macsec-kernel"] > 0 && m["macsec-router"] > 0)
			printf "\nMACsec (GCM-AES-128 on the WAN VLAN): router / kernel = %.2f\n", m["macsec-router"] / m["macsec-kernel"]
		if (m["gro-on"] > 0 && m["gro-off"] > 0)
			printf "\nkernel GRO on / off: %.2f (the seed on the board: 572/939 = 0.61)\n", m["gro-on"] / m["gro-off"]
		if (m["gro-on"] > 0) {
			g = 572 / m["gro-on"]
			printf "calibration: board 572 Mbit/s / guest GRO-on %.1f = %.2f effective board GIPS\n", m["gro-on"], g
			for (i = 1; i <= cases; i++) if (n[i] ~ /^router/) printf "  projection: %s on the board = %.0f Mbit/s\n", n[i], m[n[i]] * g
		}
		if (m["gro-off"] > 0) {
			g = 939 / m["gro-off"]
			printf "calibration (second point): board 939 Mbit/s / guest GRO-off %.1f = %.2f effective board GIPS\n", m["gro-off"], g
			for (i = 1; i <= cases; i++) if (n[i] ~ /^router/) printf "  projection: %s on the board = %.0f Mbit/s\n", n[i], m[n[i]] * g
		}
	}' "$1"
	sys_report "$1"
	[ -z "${2:-}" ] || payload_report "$1" "$2"
	[ -z "${2:-}" ] || [ -z "$PROF" ] || prof_report "$1" "$2"
}

# prof_report OUT PLOG: with ARMGUEST_PROF=1, the kernel functions that ran
# the most instructions per LAN frame in each case (the plugin's blocks
# named from the guest's kallsyms, "AG KALL" lines; 8-digit lower-case
# addresses compare as strings). User space is one line: our code's own
# split is scripts/armproj.sh's.
prof_report() {
	local kall
	kall=$(mktemp /tmp/armguest-kall.XXXXXX)
	{
		grep '^AG KALL ' "$1"
		# the router's own functions (a static, non-PIE binary: fixed
		# addresses), named "router:" in the profile
		[ ! -s "$ROUTER_SYMS" ] || GOARCH= GOOS= go tool nm -n "$ROUTER_SYMS" |
			awk '$2 ~ /^[tT]$/ { a = $1; while (length(a) < 8) a = "0" a; printf "AG KALL u%s %s %s\n", a, $2, $3 == "runtime.etext" ? "user:other-processes" : "router:" $3 }'
	} | sort -k3,3 >"$kall"
	awk -v top="${ARMGUEST_PROF_TOP:-25}" -v kall="$kall" '
	FNR == NR && $1 == "PL" && $2 == "PROF" { m = $3; if ($4 == "user" || $4 == "small") tag[m, $4] += $5; else { np[m]++; pa[m, np[m]] = $4; pv[m, np[m]] = $5; if ($4 ~ /^u/) up[m] += $5 }; next }
	FNR == NR { next }
	/^AG KALL / { if (FILENAME == kall) { ka[++nk] = $3; kn[nk] = $5 ($6 != "" ? " " $6 : "") }; next }
	/^AG RESULT / { for (i = 4; i <= NF; i++) if ($i ~ /^frames=/) fr[$3] = substr($i, 8); n[++cases] = $3 }
	function name(a,   lo, hi, mid) {
		lo = 1; hi = nk; if (nk == 0 || a < ka[1]) return "?"
		while (lo < hi) { mid = int((lo + hi + 1) / 2); if (ka[mid] <= a) lo = mid; else hi = mid - 1 }
		return kn[lo]
	}
	END {
		if (nk == 0) { print "\nprofile: no kallsyms from the guest"; exit }
		for (i = 1; i <= cases; i++) {
			c = n[i]; m = 2 * i - 1; f = fr[c]
			if (f == 0) continue
			delete by; t = 0
			for (j = 1; j <= np[m]; j++) { s = name(pa[m, j]); by[s] += pv[m, j]; t += pv[m, j] }
			printf "\n%s: instructions per LAN frame by kernel function (blocks of >= 200,000 instructions in the window)\n", c
			printf "  %-40s %9.0f\n  %-40s %9.0f\n  %-40s %9.0f\n", "user space (all processes)", tag[m, "user"] / f, "kernel, in smaller blocks", tag[m, "small"] / f, "kernel, named below (total)", (t - up[m]) / f
			printf "  %-40s %9.0f\n", "user space in blocks named below", up[m] / f
			k = 0
			for (s in by) srt[++k] = sprintf("%012d %s", by[s], s)
			for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++) if (srt[b] > srt[a]) { x = srt[a]; srt[a] = srt[b]; srt[b] = x }
			for (a = 1; a <= k && a <= top; a++) { v = substr(srt[a], 1, 12) + 0; printf "  %-40s %9.0f\n", substr(srt[a], 14), v / f }
			delete srt
		}
	}' "$2" "$kall" "$1"
	rm -f "$kall"
}

# sys_report prints the router's system calls per LAN frame from the
# router-sys cases' "AG SYS" lines (the guest's ftrace hist trigger).
sys_report() {
	grep -q '^AG SYS ' "$1" || return 0
	awk '/^AG RESULT / { for (i = 4; i <= NF; i++) if ($i ~ /^frames=/) fr[$3] = substr($i, 8) }
	/^AG SYS / {
		c = $3; name = $5; n = $NF
		if (name ~ /^[0-9]+$/ || name == "") name = "nr" $5
		# page faults and context switches are listed, not summed with the calls
		k[c, name] = n; if (name !~ /^(page_faults|ctxt)_/) t[c] += n; if (!(c in seen)) { seen[c] = 1; cs[++nc] = c }
		names[c] = names[c] " " name
	}
	END {
		for (j = 1; j <= nc; j++) {
			c = cs[j]; f = fr[c]
			if (f == 0) continue
			printf "\n%s: the router'"'"'s system calls during the run, %d frames (%.4f per frame, %.1f frames per call)\n", c, f, t[c] / f, f / t[c]
			split(names[c], ns, " ")
			for (i in ns) printf "  %-22s %9d  %.4f per frame  %8.1f frames per call\n", ns[i], k[c, ns[i]], k[c, ns[i]] / f, f / k[c, ns[i]]
		}
	}' "$1"
}

# payload_report OUT PLOG: the payload plugin's counts per LAN frame and
# the board's modelled time, instructions plus the DMA-cold cache lines
# its software reads (docs/arm-projection.md, "What icount leaves out").
# The case of the i-th "AG RESULT" line is the window between the
# plugin's marks 2i and 2i+1.
payload_report() {
	awk -v cpi="${ARMGUEST_CPI:-1.5}" -v ghz="${ARMGUEST_GHZ:-1.4}" -v linens="${ARMGUEST_LINE_NS:-}" -v hdr="${ARMGUEST_HDR_LINES:-2}" '
	FNR == NR && $1 == "PL" && $2 == "MARK" {
		m = $3; nm++
		for (i = 4; i <= NF; i++) { split($i, a, "="); split(a[2], v, "/"); val[m, a[1]] = v[1]; ld[m, a[1]] = v[2]; st[m, a[1]] = v[3]; lds[m] += v[4] }
		next
	}
	FNR != NR && /^AG RESULT / {
		delete kv; for (i = 3; i <= NF; i++) { p = index($i, "="); kv[substr($i, 1, p - 1)] = substr($i, p + 1) }
		c = $3; n[++cases] = c; fr[c] = kv["frames"]; ms[c] = kv["ms"]; mb[c] = kv["mbps"]
	}
	function d(arr, c, k, i) { i = idx[c]; return (arr[2 * i + 1, k] - arr[2 * i, k]) / fr[c] }
	END {
		print ""
		if (nm != 2 * cases) { printf "payload plugin: %d marks for %d cases (want two each): no payload figures\n", nm, cases; exit }
		for (i = 1; i <= cases; i++) idx[n[i]] = i - 1
		print "payload plugin, per LAN frame: bytes loaded by the kernel checksum (csum) and copy routines in calls of 256 bytes"
		print "or more, by caller: brx board receive (GRO, netfilter, AF_PACKET/AF_XDP rx), btx board transmit (GSO, sendmsg),"
		print "host (iperf3 ends); small: loads of shorter calls (header moves), all callers; instr: the routines'"'"' instructions"
		printf "%-15s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "case", "brx.csum", "brx.copy", "btx.csum", "btx.copy", "host.csum", "host.copy", "small", "brx.instr", "host.instr"
		for (i = 1; i <= cases; i++) {
			c = n[i]
			bi[c] = d(val, c, "brx.csum") + d(val, c, "brx.copy") + d(val, c, "btx.csum") + d(val, c, "btx.copy")
			hi[c] = d(val, c, "host.csum") + d(val, c, "host.copy")
			cold[c] = (d(ld, c, "brx.csum") + d(ld, c, "brx.copy")) / 32
			bits[c] = 1448 * 8	# a full-size segment'"'"'s TCP payload, what iperf3 counts
			ipf[c] = ms[c] * 1e6 / fr[c]
			i0 = idx[c]
			printf "%-15s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", c, d(ld, c, "brx.csum"), d(ld, c, "brx.copy"), d(ld, c, "btx.csum"), d(ld, c, "btx.copy"), d(ld, c, "host.csum"), d(ld, c, "host.copy"), (lds[2 * i0 + 1] - lds[2 * i0]) / fr[c], d(val, c, "brx.csum") + d(val, c, "brx.copy"), hi[c]
		}
		if (!("direct" in idx)) { print "(no direct case: no board model)"; exit }
		# ns per DMA-cold 32-byte line read by the board: from the board itself,
		# conntrack checksum validation off/on with GRO off, 940 -> 666 Mbit/s
		# (netdev, Milecki), less the validation instructions, over its lines.
		src = "ARMGUEST_LINE_NS"
		if (linens == "" && ("gro-off-ctcsum" in idx) && ("gro-off" in idx)) {
			c = "gro-off-ctcsum"
			dl = cold[c] - cold["gro-off"]; di = (bi[c] - bi["gro-off"]) * cpi / ghz
			if (dl > 10) { linens = (bits[c] * 1000 * (1 / 666 - 1 / 940) - di) / dl; src = sprintf("board 940->666 Mbit/s with conntrack validation, %.0f lines, %.0f instr", dl, bi[c] - bi["gro-off"]) }
		}
		if (linens == "") { linens = 100; src = "default" }
		printf "\nboard model: time per frame = board instr x CPI %.2f / %.2f GHz + DMA-cold lines x %.0f ns (%s)\n", cpi, ghz, linens, src
		print "board instr = instr/frame - direct + the host checksum/copy instructions the case saved the hosts;"
		printf "DMA-cold lines = brx loads / 32 + %d header lines (the bgmac DMAs each frame into DRAM: the first CPU read of a line\n", hdr
		print " misses L1 and L2; the headers, parsed in every case, are not read by the counted routines)"
		print "instr-only, modelled: Mbit/s on the board, without and with the DMA-cold lines"
		printf "%-15s %11s %11s %10s %12s %12s\n", "case", "Mbit/s/GIPS", "board instr", "cold lines", "instr-only", "modelled"
		for (i = 1; i <= cases; i++) {
			c = n[i]
			if (c == "direct") continue
			b = ipf[c] - ipf["direct"] + hi["direct"] - hi[c]
			t0 = b * cpi / ghz; t = t0 + (cold[c] + hdr) * linens
			mod[c] = bits[c] * 1000 / t; raw[c] = mb[c]
			printf "%-15s %11.1f %11.0f %10.1f %12.0f %12.0f\n", c, mb[c], b, cold[c] + hdr, bits[c] * 1000 / t0, mod[c]
		}
		if (("gro-on" in mod) && ("gro-off" in mod))
			printf "\nkernel GRO on / off: icount (whole guest) %.2f, modelled board %.2f; the seed on the board: 572/939 = 0.61\n", raw["gro-on"] / raw["gro-off"], mod["gro-on"] / mod["gro-off"]
		for (i = 1; i <= cases; i++) if (n[i] ~ /^router/ && ("gro-off" in mod))
			printf "  modelled: %s / kernel GRO off = %.2f (%.0f Mbit/s if the kernel GRO off runs at the seed'"'"'s 939)\n", n[i], mod[n[i]] / mod["gro-off"], 939 * mod[n[i]] / mod["gro-off"]
		# The line cost from outside the seed (not fitted to it): a
		# published Cortex-A9 DRAM figure (7-cpu.com, Exynos 4210 at
		# 1.2 GHz, LPDDR2-800): 68 ns per line with misses overlapped
		# (parallel random read), 37 cycles + 110 ns = 141 ns for one
		# dependent miss. A streamed checksum over DMA-cold lines lies
		# between the two.
		if (!(("gro-on" in mod) && ("gro-off" in mod))) exit
		print "\nthe line cost from a published Cortex-A9 (7-cpu.com, Exynos 4210): modelled GRO on / off, and each router case in Mbit/s"
		lns[1] = 68; lns[2] = linens; lns[3] = 141
		for (j = 1; j <= 3; j++) {
			ln = lns[j]
			for (i = 1; i <= cases; i++) {
				c = n[i]
				if (c == "direct") continue
				b = ipf[c] - ipf["direct"] + hi["direct"] - hi[c]
				m2[c] = bits[c] * 1000 / (b * cpi / ghz + (cold[c] + hdr) * ln)
			}
			printf "  t_line %3.0f ns %-21s GRO on / off %.2f", ln, j == 1 ? "(overlapped misses):" : j == 3 ? "(one dependent miss):" : "(fitted above):", m2["gro-on"] / m2["gro-off"]
			for (i = 1; i <= cases; i++) if (n[i] ~ /^router/) printf ", %s %.0f", n[i], m2[n[i]]
			printf "\n"
		}
	}' "$2" "$1"
}

# One block, parsed whole before it runs: an edit of this file during a
# run cannot change what the running script reads next.
{
	SECS=${ARMGUEST_SECS:-6}
	CASES=${ARMGUEST_CASES:-direct gro-on gro-off gro-off-ctcsum gro-on-txoff router router-af_xdp macsec-kernel macsec-router}
	PAYLOAD=${ARMGUEST_PAYLOAD:-1}
	PROF=${ARMGUEST_PROF:-}
	ROUTER_SYMS=/tmp/armguest-router-syms.$$
	case ${1:-} in
	prepare) prepare ;;
	--smoke) SECS=${ARMGUEST_SECS:-2}; CASES=${ARMGUEST_CASES:-gro-on}; PAYLOAD=${ARMGUEST_PAYLOAD:-0}; prepare; run_guest ;;
	"") prepare; run_guest ;;
	*) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 2 ;;
	esac
	exit
}
