package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/PacketFive/hinic/internal/hilink"
)

// The HiLink switch (hinic link serve). Every metric has the label
// port, the port's number.
var (
	linkUp        = def("link", "hinic_link_port_up", Gauge, "1 while a GPU backend is connected to the port, else 0.", "port")
	linkRxFrames  = def("link", "hinic_link_port_rx_frames_total", Counter, "Frames received on the port.", "port")
	linkRxBytes   = def("link", "hinic_link_port_rx_bytes_total", Counter, "Bytes of the frames received on the port.", "port")
	linkTxFrames  = def("link", "hinic_link_port_tx_frames_total", Counter, "Frames sent on the port.", "port")
	linkTxBytes   = def("link", "hinic_link_port_tx_bytes_total", Counter, "Bytes of the frames sent on the port.", "port")
	linkDrops     = def("link", "hinic_link_port_drops_total", Counter, "Frames dropped at the port, by reason.", "port", "reason")
	linkCreditsIn = def("link", "hinic_link_port_credits_received_total", Counter, "Credits the peer returned.", "port")
	linkCredOut   = def("link", "hinic_link_port_credits_sent_total", Counter, "Credits returned to the peer.", "port")
	linkStalls    = def("link", "hinic_link_port_credit_stalls_total", Counter, "Times frames waited for the peer's credit.", "port")
	linkSessions  = def("link", "hinic_link_port_sessions_total", Counter, "Peers that connected to the port.", "port")
	linkRejected  = def("link", "hinic_link_port_rejected_total", Counter, "Hellos refused and peers that sent none.", "port")
	linkTxCredits = def("link", "hinic_link_port_tx_credits", Gauge, "Credits the peer has granted and the switch not used.", "port")
	linkHeld      = def("link", "hinic_link_port_held_frames", Gauge, "Frames of the port the switch holds.", "port")
	linkQueued    = def("link", "hinic_link_port_queued_frames", Gauge, "Frames queued to be sent on the port.", "port")
)

// Link returns the collector of a HiLink switch: status is
// (*hilink.Switch).Status.
func Link(status func() hilink.Status) prometheus.Collector {
	return &collector[hilink.Status]{source: "link", status: status, emit: emitLink}
}

func emitLink(st hilink.Status, emit emitFunc) {
	for _, p := range st.Ports {
		n := strconv.Itoa(p.Num)
		c := p.Counters
		emit(linkUp, b(p.State == "up"), n)
		emit(linkRxFrames, u(c.RxFrames), n)
		emit(linkRxBytes, u(c.RxBytes), n)
		emit(linkTxFrames, u(c.TxFrames), n)
		emit(linkTxBytes, u(c.TxBytes), n)
		for reason, v := range c.Drops {
			emit(linkDrops, u(v), n, reason)
		}
		emit(linkCreditsIn, u(c.CreditsIn), n)
		emit(linkCredOut, u(c.CreditsOut), n)
		emit(linkStalls, u(c.CreditStalls), n)
		emit(linkSessions, u(c.Sessions), n)
		emit(linkRejected, u(c.Rejected), n)
		emit(linkTxCredits, float64(p.TxCredits), n)
		emit(linkHeld, float64(p.Held), n)
		emit(linkQueued, float64(p.Queued), n)
	}
}
