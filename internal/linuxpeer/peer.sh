#!/bin/bash
# Builds the image of the Linux test peer (package linuxpeer, README.md):
# Debian's kernel (macsec.ko, 8021q.ko; sch_cake.ko and the rest of a
# router's: nftables masquerade, fq_codel, ifb, mirred) and an initramfs
# with static busybox, iproute2's ip and tc, nft, iperf3,
# wpa_supplicant, pppd with pppoe-server (an access concentrator, with
# kea-dhcp6 delegating prefixes and radvd announcing on its PPP links)
# and wg (WireGuard's modules too), cached in $CACHE.
#   peer.sh prepare    # once; prints the kernel and initramfs paths
set -euo pipefail
# CACHE holds one image per layout version: bump the suffix when the
# initramfs's contents change, so that no stale image is reused.
CACHE=${LINUXPEER_CACHE:-/var/tmp/gvrouter-linuxpeer/v4}
log() { echo "linuxpeer: $*" >&2; }

# The Debian packages prepare needs on the host; scripts/setup.sh installs the same.
# busybox-static is downloaded, not installed: it conflicts with busybox,
# which udhcpc (a DHCP peer of the services' tests) depends on.
PKGS="qemu-system-x86 iproute2 nftables cpio kmod iperf3 wpasupplicant python3 ppp pppoe wireguard-tools kea-dhcp6-server radvd"

need_pkgs() {	# install the Debian packages that are missing
	local miss=() p
	for p; do dpkg -s "$p" >/dev/null 2>&1 || miss+=("$p"); done
	[ ${#miss[@]} -eq 0 ] ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${miss[@]}" >&2
}

deb_x() {	# download Debian package $1 and unpack it into directory $2
	(cd "$2" && apt-get download -o APT::Sandbox::User=root "$1" >&2 &&
		dpkg-deb -x "$1"_*.deb . && rm -f "$1"_*.deb)
}

copy_dyn() {	# copy dynamic binary $1 to $r/$2/ with the libraries ldd names
	cp -L "$1" "$r/$2/"
	for l in $(ldd "$1" | grep -o '/[^ ]*'); do mkdir -p "$r${l%/*}"; cp -Ln "$l" "$r$l"; done
}

prepare() {	# once: $CACHE/kernel + $CACHE/base.cpio
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ -s "$CACHE/kernel" ] && [ -s "$CACHE/base.cpio" ]; then
		echo "$CACHE/kernel $CACHE/base.cpio"
		return
	fi
	# shellcheck disable=SC2086
	need_pkgs $PKGS
	log "building the guest image in $CACHE (once)"
	local t k kdir=/ b m
	t=$(mktemp -d "$CACHE/build.XXXXXX")
	r=$t/root
	# kernel: an installed Debian kernel that has macsec.ko, else download linux-image-amd64's
	k=$(find /lib/modules -path '*/kernel/drivers/net/macsec.ko' 2>/dev/null | cut -d/ -f4 | sort -V | tail -1 || true)
	if [ -z "$k" ] || [ ! -f "/boot/vmlinuz-$k" ]; then
		b=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
		[ -n "$b" ] || { log "apt-cache knows no linux-image-amd64 (apt-get update?)"; exit 1; }
		kdir=$t/k; mkdir "$kdir"; deb_x "$b" "$kdir"
		k=${b#linux-image-}
		depmod -b "$kdir" "$k"
	fi
	mkdir -p "$r"/{bin,sbin,dev,proc,sys,tmp,run,lib/modules}
	if dpkg -s busybox-static >/dev/null 2>&1; then
		cp /bin/busybox "$r/bin/busybox"
	else
		mkdir "$t/bb"; deb_x busybox-static "$t/bb"; cp "$t/bb/bin/busybox" "$r/bin/busybox"
	fi
	copy_dyn "$(command -v ip)" sbin
	copy_dyn "$(command -v iperf3)" sbin
	copy_dyn "$(command -v tc)" sbin
	copy_dyn "$(command -v nft)" sbin
	copy_dyn /usr/sbin/wpa_supplicant sbin
	# PPPoE's far end (pppoe-server starts pppd with the kernel's PPPoE
	# plugin) and WireGuard's tool
	copy_dyn /usr/sbin/pppd sbin
	copy_dyn /usr/sbin/pppoe-server sbin
	copy_dyn /usr/sbin/pppoe sbin
	copy_dyn "$(command -v wg)" sbin
	# the ISP's IPv6 over PPP: DHCPv6 prefix delegation and RAs (v4)
	copy_dyn /usr/sbin/kea-dhcp6 sbin
	copy_dyn /usr/sbin/radvd sbin
	for m in /usr/lib/pppd/*/pppoe.so; do mkdir -p "$r${m%/*}"; copy_dyn "$m" "${m%/*}"; done
	for b in $("$r/bin/busybox" --list); do [ -e "$r/bin/$b" ] || ln -s busybox "$r/bin/$b"; done
	# the last line: Linux as a router with SQM, the anchor of the lab's SQM bench
	for m in virtio_pci virtio_net 8021q macsec ctr gcm ghash-generic aesni-intel ghash-clmulni-intel cmac \
		nft_masq nft_chain_nat sch_cake sch_fq_codel sch_ingress ifb act_mirred cls_matchall cls_u32 \
		pppoe ppp_generic wireguard; do
		modprobe -d "$kdir" -S "$k" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r m; do
		cp "$m" "$r/lib/modules/"
		echo "${m##*/}" >>"$r/lib/modules/order"
	done
	# kernel: the uncompressed vmlinux (PVH entry) boots seconds faster under TCG than the bzImage
	if ! grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$k" || ! /usr/bin/python3 -c 'import lzma, sys
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(lzma.LZMADecompressor().decompress(d[d.index(b"\xfd7zXZ\0"):]))' \
		"$kdir/boot/vmlinuz-$k" "$CACHE/kernel.tmp"; then
		cp "$kdir/boot/vmlinuz-$k" "$CACHE/kernel.tmp"
	fi
	(cd "$r" && find . | cpio -o -H newc --quiet) >"$CACHE/base.cpio.tmp"
	mv "$CACHE/kernel.tmp" "$CACHE/kernel"
	mv "$CACHE/base.cpio.tmp" "$CACHE/base.cpio"
	rm -rf "$t"
	log "guest kernel $k, initramfs $(du -h "$CACHE/base.cpio" | cut -f1)"
	echo "$CACHE/kernel $CACHE/base.cpio"
}

case ${1:-} in
prepare) prepare ;;
*) sed -n '2,5p' "$0"; exit 2 ;;
esac
