package status

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// PortUMEM is an af_xdp port's packet memory (UMEM): which ports share
// it, where its frames are, and how the port's transmits left.
type PortUMEM struct {
	// ID is the router's number for the UMEM, e.g. 1 (0: the port's
	// own, outside the router's pool).
	ID int `json:"id"`
	// SharedWith are the other ports on the same UMEM, e.g. ["wan0"]:
	// frames forwarded between them leave from the buffer they arrived
	// in. Empty when no other port shares it.
	SharedWith []string `json:"shared_with"`
	// Frames and FrameSize are its size, e.g. 8448 frames of 2048 bytes.
	Frames    int `json:"frames"`
	FrameSize int `json:"frame_size"`
	// Free, Fill, RX, Held, Lent, TX and Completion say where its frames
	// are (they add up to Frames): free, on fill rings (or in the
	// driver), on RX rings unread, held by a receive batch, held and
	// lent to a TX ring, on TX rings, on completion rings. The same for
	// every port sharing the UMEM.
	Free       int `json:"free"`
	Fill       int `json:"fill"`
	RX         int `json:"rx"`
	Held       int `json:"held"`
	Lent       int `json:"lent"`
	TX         int `json:"tx"`
	Completion int `json:"completion"`
	// TxZeroCopy counts frames the port sent from the buffer they were
	// received in; TxCopied frames it copied into a UMEM frame first
	// (from netstack, an af_packet port or another UMEM).
	TxZeroCopy uint64 `json:"tx_zero_copy"`
	TxCopied   uint64 `json:"tx_copied"`
}

// umemCollector describes the af_xdp ports' UMEM metrics.
type umemCollector struct {
	txZeroCopy, txCopied, shared, frames *prometheus.Desc
}

func newUMEMCollector() umemCollector {
	return umemCollector{
		txZeroCopy: prometheus.NewDesc("gvrouter_port_tx_zero_copy_total",
			"Frames an af_xdp port sent from the buffer they were received in, on its UMEM (its own, or one it shares with the ingress port).", []string{"port"}, nil),
		txCopied: prometheus.NewDesc("gvrouter_port_tx_copied_total",
			"Frames an af_xdp port copied into a UMEM frame before sending them.", []string{"port"}, nil),
		shared: prometheus.NewDesc("gvrouter_port_umem_shared_ports",
			"How many other ports share an af_xdp port's UMEM.", []string{"port", "umem"}, nil),
		frames: prometheus.NewDesc("gvrouter_port_umem_frames",
			"Where the frames of an af_xdp port's UMEM are (the same for every port sharing it).", []string{"port", "place"}, nil),
	}
}

func (c umemCollector) describe(ch chan<- *prometheus.Desc) {
	ch <- c.txZeroCopy
	ch <- c.txCopied
	ch <- c.shared
	ch <- c.frames
}

func (c umemCollector) collect(ch chan<- prometheus.Metric, p *Port) {
	u := p.UMEM
	if u == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.txZeroCopy, prometheus.CounterValue, float64(u.TxZeroCopy), p.Name)
	ch <- prometheus.MustNewConstMetric(c.txCopied, prometheus.CounterValue, float64(u.TxCopied), p.Name)
	ch <- prometheus.MustNewConstMetric(c.shared, prometheus.GaugeValue, float64(len(u.SharedWith)), p.Name, strconv.Itoa(u.ID))
	collectLabelled(ch, c.frames, prometheus.GaugeValue, p.Name,
		labelled{"free", float64(u.Free)}, labelled{"fill", float64(u.Fill)}, labelled{"rx", float64(u.RX)}, labelled{"held", float64(u.Held)},
		labelled{"lent", float64(u.Lent)}, labelled{"tx", float64(u.TX)}, labelled{"completion", float64(u.Completion)})
}
