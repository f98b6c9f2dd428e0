package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/PacketFive/hinic/internal/fabric"
)

// HiSwitch (hinic fabric serve). Every port metric has the labels
// switch (the switch's name) and port (its number).
var (
	fabPortUp      = def("fabric", "hinic_fabric_port_up", Gauge, "1 while a peer is connected to the port, else 0.", "switch", "port")
	fabSessions    = def("fabric", "hinic_fabric_port_sessions_total", Counter, "Peers that connected to the port.", "switch", "port")
	fabRxFrames    = def("fabric", "hinic_fabric_port_rx_frames_total", Counter, "Frames received on the port, dropped ones included.", "switch", "port")
	fabRxBytes     = def("fabric", "hinic_fabric_port_rx_bytes_total", Counter, "Bytes of the frames received on the port.", "switch", "port")
	fabTxFrames    = def("fabric", "hinic_fabric_port_tx_frames_total", Counter, "Frames sent on the port, PFC frames included.", "switch", "port")
	fabTxBytes     = def("fabric", "hinic_fabric_port_tx_bytes_total", Counter, "Bytes of the frames sent on the port.", "switch", "port")
	fabDrops       = def("fabric", "hinic_fabric_port_drops_total", Counter, "Frames dropped at the port, by reason (docs/fabric.md).", "switch", "port", "reason")
	fabFloods      = def("fabric", "hinic_fabric_port_floods_total", Counter, "Frames received on the port that were flooded (broadcast, multicast, unknown unicast).", "switch", "port")
	fabPauseRx     = def("fabric", "hinic_fabric_port_pause_received_total", Counter, "IEEE 802.3x PAUSE frames received from the peer.", "switch", "port")
	fabFaults      = def("fabric", "hinic_fabric_port_faults_injected_total", Counter, "Faults injected at the port, by kind.", "switch", "port", "kind")
	fabClassTxFr   = def("fabric", "hinic_fabric_port_class_tx_frames_total", Counter, "Data frames sent on the port, by traffic class.", "switch", "port", "class")
	fabClassTxBy   = def("fabric", "hinic_fabric_port_class_tx_bytes_total", Counter, "Bytes of data frames sent on the port, by traffic class.", "switch", "port", "class")
	fabClassTail   = def("fabric", "hinic_fabric_port_class_queue_full_drops_total", Counter, "Frames of a lossy class tail-dropped at the port's full egress queue.", "switch", "port", "class")
	fabClassECN    = def("fabric", "hinic_fabric_port_class_ecn_marked_total", Counter, "Frames CE-marked (ECN) at the port's egress queue, by class.", "switch", "port", "class")
	fabClassPFCTx  = def("fabric", "hinic_fabric_port_class_pfc_sent_total", Counter, "PFC frames (XOFF and XON) the switch sent to the peer for the class.", "switch", "port", "class")
	fabClassPFCRx  = def("fabric", "hinic_fabric_port_class_pfc_received_total", Counter, "PFC frames from the peer that paused or resumed the class.", "switch", "port", "class")
	fabQueueFrames = def("fabric", "hinic_fabric_port_queue_frames", Gauge, "Frames in the port's egress queue of the class.", "switch", "port", "class")
	fabQueueBytes  = def("fabric", "hinic_fabric_port_queue_bytes", Gauge, "Bytes in the port's egress queue of the class.", "switch", "port", "class")
	fabClassPaused = def("fabric", "hinic_fabric_port_class_paused", Gauge, "1 while the peer has paused the class at this port.", "switch", "port", "class")
	fabClassXOFF   = def("fabric", "hinic_fabric_port_class_xoff", Gauge, "1 while this switch has paused the class at the peer.", "switch", "port", "class")
	fabFDBEntries  = def("fabric", "hinic_fabric_fdb_entries", Gauge, "Entries in the switch's forwarding database.", "switch")
	fabFDBFull     = def("fabric", "hinic_fabric_fdb_full_total", Counter, "MAC addresses not learnt because the forwarding database was full.", "switch")
)

// Fabric returns the collector of a HiSwitch fabric: status is
// (*fabric.Fabric).Status.
func Fabric(status func() fabric.Status) prometheus.Collector {
	return &collector[fabric.Status]{source: "fabric", status: status, emit: emitFabric}
}

var classNames = func() (s [fabric.NumTC]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func emitFabric(st fabric.Status, emit emitFunc) {
	for _, sw := range st.Switches {
		emit(fabFDBEntries, float64(len(sw.FDB)), sw.Name)
		emit(fabFDBFull, u(sw.FDBFull), sw.Name)
		for _, p := range sw.Ports {
			n := strconv.Itoa(p.Num)
			emit(fabPortUp, b(p.State == "up"), sw.Name, n)
			emit(fabSessions, float64(p.Sessions), sw.Name, n)
			emit(fabRxFrames, u(p.RxFrames), sw.Name, n)
			emit(fabRxBytes, u(p.RxBytes), sw.Name, n)
			emit(fabTxFrames, u(p.TxFrames), sw.Name, n)
			emit(fabTxBytes, u(p.TxBytes), sw.Name, n)
			for reason, v := range p.Drops {
				emit(fabDrops, u(v), sw.Name, n, reason)
			}
			emit(fabFloods, u(p.Floods), sw.Name, n)
			emit(fabPauseRx, u(p.PauseRecv), sw.Name, n)
			fk := p.FaultKinds
			emit(fabFaults, u(fk.Drop), sw.Name, n, "drop")
			emit(fabFaults, u(fk.Duplicate), sw.Name, n, "duplicate")
			emit(fabFaults, u(fk.Reorder), sw.Name, n, "reorder")
			emit(fabFaults, u(fk.Corrupt), sw.Name, n, "corrupt")
			var paused, xoff [fabric.NumTC]bool
			for _, tc := range p.Paused {
				paused[tc&(fabric.NumTC-1)] = true
			}
			for _, tc := range p.XOFF {
				xoff[tc&(fabric.NumTC-1)] = true
			}
			for tc, c := range p.Classes {
				cl := classNames[tc]
				emit(fabClassTxFr, u(c.TxFrames), sw.Name, n, cl)
				emit(fabClassTxBy, u(c.TxBytes), sw.Name, n, cl)
				emit(fabClassTail, u(c.QueueFull), sw.Name, n, cl)
				emit(fabClassECN, u(c.ECNMarked), sw.Name, n, cl)
				emit(fabClassPFCTx, u(c.PFCSent), sw.Name, n, cl)
				emit(fabClassPFCRx, u(c.PFCRecv), sw.Name, n, cl)
				emit(fabQueueFrames, float64(p.QueueFrames[tc]), sw.Name, n, cl)
				emit(fabQueueBytes, float64(p.QueueBytes[tc]), sw.Name, n, cl)
				emit(fabClassPaused, b(paused[tc]), sw.Name, n, cl)
				emit(fabClassXOFF, b(xoff[tc]), sw.Name, n, cl)
			}
		}
	}
}
