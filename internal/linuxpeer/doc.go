// Package linuxpeer boots a real Linux peer for interop tests: Debian's
// kernel (with macsec.ko, 8021q.ko) under QEMU with a small initramfs of
// static busybox, iproute2, iperf3 and wpa_supplicant, whose virtio NIC
// is a tap in a network namespace. The program under test sits on that
// tap. It exists because the kernel the tests run on may have no macsec
// or 8021q module (the development VM's has neither), and because MKA
// against Linux needs wpa_supplicant driving kernel MACsec.
//
// Prepare builds the image once (peer.sh prepare, cached under /var/tmp);
// Start boots a guest with a job (plain, vlan, macsec, mka) and waits
// until it is ready; Peer.Run runs a shell command in the guest; Stop
// powers it off and returns its console output. README.md lists the
// guest settings.
//
// It is for tests only. Everything a Peer makes (its QEMU, by PID; its
// tap; its namespace if it made one; its run directory) it removes in
// Stop, and nothing else.
package linuxpeer
