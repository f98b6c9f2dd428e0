package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/rdma"
)

// The device backend (hinic device serve). Every metric has the label
// vnic, the vNIC's name.
var (
	vnicLinkUp     = def("device", "hinic_vnic_link_up", Gauge, "1 while the vNIC's fabric port is up, else 0.", "vnic")
	vnicGuest      = def("device", "hinic_vnic_guest_connected", Gauge, "1 while a guest (QEMU) is connected to the vNIC, else 0.", "vnic")
	vnicObjects    = def("device", "hinic_vnic_objects", Gauge, "Verbs objects the guest holds, by type (pd, mr, cq, qp, ah, srq).", "vnic", "type")
	vnicQPs        = def("device", "hinic_vnic_qps", Gauge, "Guest QPs by state (RESET, INIT, RTR, RTS, SQD, SQE, ERR).", "vnic", "state")
	vnicSessions   = def("device", "hinic_vnic_sessions_total", Counter, "Guest sessions (QEMU connections) the vNIC accepted.", "vnic")
	vnicDoorbells  = def("device", "hinic_vnic_doorbells_total", Counter, "Doorbells the guest rang.", "vnic")
	vnicRecvRefill = def("device", "hinic_vnic_recv_refills_total", Counter, "Messages that found the receive queue empty and were taken after the device fetched the guest's ring on the spot (else an RNR NAK or a drop).", "vnic")
	vnicRecvFetch  = def("device", "hinic_vnic_recv_fetches_total", Counter, "Receive rings the device fetched by itself, the guest having posted without a doorbell (also in doorbells_total).", "vnic")
	vnicIRQs       = def("device", "hinic_vnic_interrupts_total", Counter, "Interrupts (MSI-X vectors) the backend raised.", "vnic")
	vnicAdmin      = def("device", "hinic_vnic_admin_commands_total", Counter, "Admin queue commands executed.", "vnic")
	vnicAdminErr   = def("device", "hinic_vnic_admin_errors_total", Counter, "Admin queue commands that failed.", "vnic")
	vnicL2Tx       = def("device", "hinic_vnic_l2_tx_frames_total", Counter, "Frames the guest's netdev sent.", "vnic")
	vnicL2Rx       = def("device", "hinic_vnic_l2_rx_frames_total", Counter, "Frames delivered to the guest's netdev.", "vnic")
	vnicL2RxDrop   = def("device", "hinic_vnic_l2_rx_dropped_total", Counter, "Frames for the guest's netdev dropped (its ring full).", "vnic")
	vnicSpoofed    = def("device", "hinic_vnic_spoofed_total", Counter, "Frames and SET_ADDR commands refused for another's MAC or IP address.", "vnic")
	vnicWQEErr     = def("device", "hinic_vnic_wqe_errors_total", Counter, "Work requests the backend refused as malformed.", "vnic")
	vnicFatal      = def("device", "hinic_vnic_fatal_total", Counter, "Times the vNIC entered the fatal state.", "vnic")
	vnicCQOver     = def("device", "hinic_vnic_cq_overflows_total", Counter, "Completions lost because the guest's CQ ring was full.", "vnic")
	vnicEvLost     = def("device", "hinic_vnic_events_lost_total", Counter, "Asynchronous events lost because the event queue was full.", "vnic")
)

// engineDefs are the transport engine's counters (rdma.Counters) that
// the endpoint exports, per vNIC.
var engineDefs = []struct {
	d *Def
	v func(*rdma.Counters) uint64
}{
	{def("device", "hinic_vnic_tx_packets_total", Counter, "Transport packets sent (RoCEv2 or IB).", "vnic"), func(c *rdma.Counters) uint64 { return c.TxPackets }},
	{def("device", "hinic_vnic_tx_bytes_total", Counter, "Bytes of the transport packets sent.", "vnic"), func(c *rdma.Counters) uint64 { return c.TxBytes }},
	{def("device", "hinic_vnic_rx_packets_total", Counter, "Transport packets accepted for a QP.", "vnic"), func(c *rdma.Counters) uint64 { return c.RxPackets }},
	{def("device", "hinic_vnic_rx_bytes_total", Counter, "Bytes of the transport packets accepted.", "vnic"), func(c *rdma.Counters) uint64 { return c.RxBytes }},
	{def("device", "hinic_vnic_rx_dropped_total", Counter, "Transport packets dropped because the receive queue was full.", "vnic"), func(c *rdma.Counters) uint64 { return c.RxDropped }},
	{def("device", "hinic_vnic_rx_icrc_errors_total", Counter, "Packets dropped for a bad ICRC.", "vnic"), func(c *rdma.Counters) uint64 { return c.RxICRCErrors }},
	{def("device", "hinic_vnic_retransmits_total", Counter, "Request packets sent again (any cause).", "vnic"), func(c *rdma.Counters) uint64 { return c.Retransmits }},
	{def("device", "hinic_vnic_retransmit_timeouts_total", Counter, "Local ACK timeouts that led to a retransmission.", "vnic"), func(c *rdma.Counters) uint64 { return c.RetransmitTimeouts }},
	{def("device", "hinic_vnic_retry_exceeded_total", Counter, "Completions with the retry-exceeded error.", "vnic"), func(c *rdma.Counters) uint64 { return c.RetryExceeded }},
	{def("device", "hinic_vnic_rnr_naks_received_total", Counter, "RNR NAKs received (the responder had no receive WQE).", "vnic"), func(c *rdma.Counters) uint64 { return c.RNRNAKsReceived }},
	{def("device", "hinic_vnic_rnr_naks_sent_total", Counter, "RNR NAKs sent.", "vnic"), func(c *rdma.Counters) uint64 { return c.RNRNAKsSent }},
	{def("device", "hinic_vnic_rnr_retry_exceeded_total", Counter, "Completions with the RNR-retry-exceeded error.", "vnic"), func(c *rdma.Counters) uint64 { return c.RNRRetryExceeded }},
	{def("device", "hinic_vnic_seq_naks_received_total", Counter, "PSN sequence error NAKs received.", "vnic"), func(c *rdma.Counters) uint64 { return c.SeqNAKsReceived }},
	{def("device", "hinic_vnic_seq_naks_sent_total", Counter, "PSN sequence error NAKs sent.", "vnic"), func(c *rdma.Counters) uint64 { return c.SeqNAKsSent }},
	{def("device", "hinic_vnic_completion_errors_total", Counter, "Work completions with a status other than success.", "vnic"), func(c *rdma.Counters) uint64 { return c.CompletionErrors }},
	{def("device", "hinic_vnic_ecn_ce_received_total", Counter, "RC packets that arrived with ECN CE.", "vnic"), func(c *rdma.Counters) uint64 { return c.CEReceived }},
	{def("device", "hinic_vnic_cnps_sent_total", Counter, "Congestion notification packets sent.", "vnic"), func(c *rdma.Counters) uint64 { return c.CNPsSent }},
	{def("device", "hinic_vnic_cnps_received_total", Counter, "Congestion notification packets received.", "vnic"), func(c *rdma.Counters) uint64 { return c.CNPsReceived }},
}

// Device returns the collector of a device backend: status is
// (*device.Server).Status.
func Device(status func() device.Status) prometheus.Collector {
	return &collector[device.Status]{source: "device", status: status, emit: emitDevice}
}

// qpStates are the QP states a vNIC's hinic_vnic_qps always shows, so
// that a state with no QP reads 0 rather than vanishing.
var qpStates = []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func emitDevice(st device.Status, emit emitFunc) {
	for _, v := range st.VNICs {
		n := v.Name
		emit(vnicLinkUp, b(v.LinkUp), n)
		emit(vnicGuest, b(v.Guest), n)
		o := v.Objects
		for _, x := range []struct {
			t string
			n int
		}{{"pd", o.PDs}, {"mr", o.MRs}, {"cq", o.CQs}, {"qp", o.QPs}, {"ah", o.AHs}, {"srq", o.SRQs}} {
			emit(vnicObjects, float64(x.n), n, x.t)
		}
		byState := map[string]int{}
		for _, q := range v.QPs {
			byState[q.State]++
		}
		for _, s := range qpStates {
			emit(vnicQPs, float64(byState[s]), n, s)
			delete(byState, s)
		}
		for s, k := range byState { // a state this table does not know
			emit(vnicQPs, float64(k), n, s)
		}
		c := v.Counters
		emit(vnicSessions, u(c.Sessions), n)
		emit(vnicDoorbells, u(c.Doorbells), n)
		emit(vnicRecvFetch, u(c.RecvFetches), n)
		emit(vnicRecvRefill, u(c.RecvRefills), n)
		emit(vnicIRQs, u(c.Interrupts), n)
		emit(vnicAdmin, u(c.AdminCmds), n)
		emit(vnicAdminErr, u(c.AdminErrors), n)
		emit(vnicL2Tx, u(c.L2Tx), n)
		emit(vnicL2Rx, u(c.L2Rx), n)
		emit(vnicL2RxDrop, u(c.L2RxDropped), n)
		emit(vnicSpoofed, u(c.Spoofed()), n)
		emit(vnicWQEErr, u(c.WQEErrors), n)
		emit(vnicFatal, u(c.Fatal), n)
		emit(vnicCQOver, u(c.CQOverflows), n)
		emit(vnicEvLost, u(c.EventsLost), n)
		for _, e := range engineDefs {
			emit(e.d, u(e.v(&v.Engine)), n)
		}
	}
}
