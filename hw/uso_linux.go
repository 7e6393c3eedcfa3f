package hw

import (
	"sync"

	"golang.org/x/sys/unix"
)

// UDPGSO reports whether WriteFramesGSO takes UDP superframes (GSOUDPL4)
// whole: a port with vnet headers that sends with sendmmsg, on Linux 6.2
// or later, where virtio_net_hdr_to_skb learnt VIRTIO_NET_HDR_GSO_UDP_L4
// (an older kernel refuses the frame with EINVAL, a tx_error drop). The
// kernel cuts such a frame into datagrams only where the device cannot
// take it whole; a veth hands it on as it is, and the peer's socket reads
// it as one with UDP_GRO or as its datagrams without.
func (p *Port) UDPGSO() bool {
	return p.GSOMaxSize() > 0 && kernelTakesUSO()
}

// kernelTakesUSO reports whether the running kernel is 6.2 or later.
var kernelTakesUSO = sync.OnceValue(func() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	major, minor, ok := parseKernelRelease(unix.ByteSliceToString(u.Release[:]))
	return ok && (major > 6 || major == 6 && minor >= 2)
})

// parseKernelRelease reads the major and minor numbers from a kernel
// release string such as "6.18.44-fc-v1300".
func parseKernelRelease(s string) (major, minor int, ok bool) {
	var n [2]int
	i := 0
	for k := range n {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 6 {
			n[k] = n[k]*10 + int(s[i]-'0')
			i++
		}
		if i == start {
			return 0, 0, false
		}
		if k == 0 {
			if i >= len(s) || s[i] != '.' {
				return 0, 0, false
			}
			i++
		}
	}
	return n[0], n[1], true
}
