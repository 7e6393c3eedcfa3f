#!/usr/bin/env bash
# setup.sh installs, on a Debian 12 machine, everything the lab (cmd/gvlab)
# and the tests need: Go if the one on PATH is missing or older than
# go.mod's, the Debian packages of the peers, and the image of the Linux
# test peer (internal/linuxpeer). It is idempotent: what is there already
# is left alone, so a second run only checks. .ci/run calls it for its
# install step, so CI proves it on a fresh machine.
#
#   sudo scripts/setup.sh
#
# It prints, last, the go binary it found or installed.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "setup: $*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (apt-get, /usr/local/go)"; exit 1; }
command -v apt-get >/dev/null || { log "needs apt-get (Debian 12)"; exit 1; }

# The Debian packages, by who needs them (all run only inside the tests'
# namespaces: policy-rc.d below keeps the packages from starting daemons
# on the machine):
#   iproute2, iputils-ping, procps, kmod: namespaces, veths, pings and
#     sysctls of the lab and the port tests; ethtool, nftables: inspecting
#     what the port code changed;
#   iperf3: the lab's TCP proofs and the bench;
#   dnsmasq, kea-dhcp6-server, radvd: the lab's ISP (DHCPv4 and DNS, an
#     IPv6 /56, RAs); kea-dhcp6 and radvd also go into the Linux guest's
#     image (v4) as the PPPoE AC's IPv6; udhcpc, isc-dhcp-client, dhcpcd-base: the LAN
#     hosts' DHCP clients; bind9-dnsutils (dig), dnsperf: DNS peers;
#     ndisc6 (rdisc6): reads the router's RAs;
#   python3-scapy, python3-cryptography, tshark: the independent packet
#     tools of the interop and attacker-side tests (scapy's MACsec layer
#     needs cryptography, which apt only recommends);
#   chromium: the status page's browser tests; curl: the status page's
#     requests from the lab's namespaces;
#   qemu-system-x86, cpio, wpasupplicant: the Linux guest of
#     internal/linuxpeer (its peer.sh downloads linux-image-amd64 and
#     busybox-static itself, not installing them: busybox-static would
#     replace udhcpc's busybox);
#   qemu-user-static: the 32-bit ARM unit tests and scripts/armproj.sh;
#   qemu-system-arm, binutils (readelf): the instruction-clocked ARM guest
#     of scripts/armguest.sh (it downloads its armhf kernel and programs
#     itself with apt-get download); gcc, xz-utils: its payload plugin
#     (scripts/armguest/payload.c, header from apt-get source qemu);
#   git, ca-certificates, curl: versions, go mod download, Go itself;
#   wireguard-tools: wg(8), the reference for keys (`wg genkey | wg
#     pubkey` and ours must agree on the same private key,
#     cmd/gvrouter TestWGKeys) and the Linux WireGuard peer;
#   irtt: the one-way delay and loss probe of bench mode q (SQM behind a
#     bloated modem);
#   ppp, pppoe: pppd and pppoe-server, the access concentrator the
#     PPPoE tests run in the Linux guest (internal/linuxpeer);
#   natpmpc, miniupnpc: libnatpmp's client and upnpc, the independent
#     NAT-PMP and UPnP IGD clients of the port mapping tests
#     (portmap/natpmp TestNatpmpc, portmap/upnp TestUpnpc).
pkgs=(
	iproute2 iputils-ping procps kmod ethtool nftables iperf3
	dnsmasq kea-dhcp6-server radvd udhcpc isc-dhcp-client dhcpcd-base bind9-dnsutils dnsperf ndisc6
	python3-scapy python3-cryptography tshark chromium curl
	qemu-system-x86 cpio wpasupplicant qemu-user-static git ca-certificates
	qemu-system-arm binutils gcc xz-utils wireguard-tools
	irtt ppp pppoe natpmpc miniupnpc
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	# No daemon starts on the machine from these packages (dnsmasq, kea,
	# radvd, irtt): the tests start their own, in namespaces.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	rm -f /usr/sbin/policy-rc.d
	trap - EXIT
fi

# Go: the version go.mod asks for at least (Debian's golang is older).
want=$(awk '$1 == "go" { print $2; exit }' go.mod)
older() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" != "$2" ]; } # $1 < $2
gobin=$(command -v go || true)
[ -n "$gobin" ] || { [ -x /usr/local/go/bin/go ] && gobin=/usr/local/go/bin/go; } || true
have=$([ -n "$gobin" ] && "$gobin" env GOVERSION | sed 's/^go//' || echo 0)
if older "$have" "$want"; then
	arch=$(dpkg --print-architecture)
	[ "$arch" = armhf ] && arch=armv6l
	log "installing Go $want in /usr/local/go (found: $have)"
	rm -rf /usr/local/go
	curl -fsSL "https://go.dev/dl/go$want.linux-$arch.tar.gz" | tar -C /usr/local -xz
	gobin=/usr/local/go/bin/go
fi
"$gobin" mod download

# The Linux test peer's image (cached in /var/tmp). It downloads Debian's
# kernel with apt-get, which needs package lists: fetch them and retry if
# the first try found none.
if ! bash internal/linuxpeer/peer.sh prepare >/dev/null; then
	apt-get update -qq >/dev/null
	bash internal/linuxpeer/peer.sh prepare >/dev/null
fi
log "ready: $("$gobin" version)"
echo "$gobin"
