package device

import (
	"context"
	"net"
	"sort"

	"github.com/PacketFive/hinic/internal/ctlsock"
	"github.com/PacketFive/hinic/internal/rdma"
)

// Status is what `hinic device status` shows: every vNIC of a backend.
type Status struct {
	VNICs []VNICStatus `json:"vnics"`
}

// VNICStatus describes one vNIC.
type VNICStatus struct {
	Name       string `json:"name"`
	Socket     string `json:"socket"`
	RAMPath    string `json:"ram_path"`
	RAMSize    uint64 `json:"ram_size"`
	Machine    string `json:"machine"`
	FabricPort string `json:"fabric_port,omitempty"`
	// FabricTransport is how frames cross the fabric port now: "shm"
	// (a shared-memory ring pair) or "socket"; empty without a port.
	FabricTransport string `json:"fabric_transport,omitempty"`
	MAC             string `json:"mac"`
	// AllowedIPs are the addresses the host pinned to the vNIC
	// (VNICConfig.AllowedIPs); none: any address.
	AllowedIPs []string      `json:"allowed_ips,omitempty"`
	LinkUp     bool          `json:"link_up"`
	Guest      bool          `json:"guest_connected"`
	PeerID     int           `json:"peer_id,omitempty"`
	State      string        `json:"state"`
	FatalCode  uint32        `json:"fatal_code,omitempty"`
	Objects    ObjectCounts  `json:"objects"`
	QPs        []QPStatus    `json:"qps"`
	Counters   VNICCounters  `json:"counters"`
	Engine     rdma.Counters `json:"engine"`
}

// ObjectCounts are the verbs objects a guest holds.
type ObjectCounts struct {
	PDs  int `json:"pds"`
	MRs  int `json:"mrs"`
	CQs  int `json:"cqs"`
	QPs  int `json:"qps"`
	AHs  int `json:"ahs"`
	SRQs int `json:"srqs"`
}

// QPStatus is one guest QP.
type QPStatus struct {
	QPN    uint32 `json:"qpn"`
	State  string `json:"state"`
	SendCQ uint32 `json:"send_cq"`
	RecvCQ uint32 `json:"recv_cq"`
	SRQ    uint32 `json:"srq,omitempty"` // receive WQEs from this SRQ
	SQCons uint32 `json:"sq_taken"`
	RQCons uint32 `json:"rq_taken"`
	Fatal  bool   `json:"fatal,omitempty"`
}

// VNICCounters are the backend's counters of a vNIC, since it started.
type VNICCounters struct {
	Sessions  uint64 `json:"sessions"`
	Rejected  uint64 `json:"rejected_connections"`
	Doorbells uint64 `json:"doorbells"`
	// RecvFetches counts the receive rings the device fetched by
	// itself, with a doorbell of its own (counted in Doorbells too),
	// because the guest posted receives without one (ABI 1.18 no_db).
	RecvFetches uint64 `json:"recv_fetches"`
	// RecvRefills counts messages that found the engine's receive queue
	// empty and were taken after the device fetched the guest's ring on
	// the spot, instead of an RNR NAK or a drop.
	RecvRefills uint64 `json:"recv_refills"`
	Interrupts  uint64 `json:"interrupts"`
	AdminCmds   uint64 `json:"admin_cmds"`
	AdminErrors uint64 `json:"admin_errors"`
	L2Tx        uint64 `json:"l2_tx"`
	L2Rx        uint64 `json:"l2_rx"`
	L2RxDropped uint64 `json:"l2_rx_dropped"`
	// L2TxSpoofed counts frames the guest sent with another source MAC;
	// L2TxMACControl, PAUSE and PFC frames of an untrusted guest. Both
	// are dropped (the descriptor completes with the error flag).
	L2TxSpoofed    uint64 `json:"l2_tx_spoofed"`
	L2TxMACControl uint64 `json:"l2_tx_mac_control"`
	// L2TxIPSpoofed counts frames dropped for an IPv4, ARP or IPv6
	// source the host did not pin (VNICConfig.AllowedIPs);
	// SetAddrRefused, SET_ADDR commands refused for such an address.
	L2TxIPSpoofed  uint64 `json:"l2_tx_ip_spoofed"`
	SetAddrRefused uint64 `json:"set_addr_refused"`
	RoCERx         uint64 `json:"roce_rx"`
	WQEErrors      uint64 `json:"wqe_errors"`
	Fatal          uint64 `json:"fatal"`
	CQOverflows    uint64 `json:"cq_overflows"`
	EventsLost     uint64 `json:"events_lost"`
	// FabricTxLost counts frames lost on a shared-memory fabric link
	// because its ring stayed full past the backlog, or failed with
	// frames kept; FabricRxMalformed, descriptors of the switch's ring
	// dropped as malformed.
	FabricTxLost      uint64 `json:"fabric_tx_lost,omitempty"`
	FabricRxMalformed uint64 `json:"fabric_rx_malformed,omitempty"`
}

type sessionSnap struct {
	objects ObjectCounts
	qps     []QPStatus
}

// publishQPs refreshes the snapshot status reads (worker goroutine).
func (s *session) publishQPs() {
	snap := sessionSnap{objects: ObjectCounts{PDs: len(s.pds), MRs: len(s.mrs), CQs: len(s.cqs),
		QPs: len(s.qps), AHs: len(s.ahs), SRQs: len(s.srqs)}}
	for qpn, q := range s.qps {
		st := QPStatus{QPN: qpn, State: q.qp.State().String(), SQCons: q.sqCons, RQCons: q.rqCons, Fatal: q.fatal}
		if q.scq != nil { // an XRC target has no CQs, an initiator no receive CQ
			st.SendCQ = q.scq.cqn
		}
		if q.rcq != nil {
			st.RecvCQ = q.rcq.cqn
		}
		if q.srq != nil {
			st.SRQ = q.srq.srqn
		}
		snap.qps = append(snap.qps, st)
	}
	sort.Slice(snap.qps, func(i, j int) bool { return snap.qps[i].QPN < snap.qps[j].QPN })
	s.statMu.Lock()
	s.snap = snap
	s.statMu.Unlock()
}

// Status returns the state and counters of the vNIC.
func (v *VNIC) Status() VNICStatus {
	c := v.cfg
	st := VNICStatus{Name: c.Name, Socket: c.Socket, RAMPath: c.RAMPath, RAMSize: c.RAMSize,
		Machine: string(c.Machine), FabricPort: c.FabricPort, MAC: net.HardwareAddr(c.MAC[:]).String(),
		LinkUp: v.linkUp(), State: ctlsock.StateWaiting, QPs: []QPStatus{}}
	for _, p := range c.AllowedIPs {
		st.AllowedIPs = append(st.AllowedIPs, p.String())
	}
	x := &v.stats
	st.Counters = VNICCounters{Sessions: x.sessions.Load(), Rejected: x.rejected.Load(),
		Doorbells: x.doorbells.Load(), RecvFetches: x.recvFetches.Load(),
		RecvRefills: x.recvRefills.Load(), Interrupts: x.interrupts.Load(), AdminCmds: x.adminCmds.Load(),
		AdminErrors: x.adminErrors.Load(), L2Tx: x.l2Tx.Load(), L2Rx: x.l2Rx.Load(),
		L2RxDropped: x.l2RxDropped.Load(), L2TxSpoofed: x.l2TxSpoofed.Load(), L2TxMACControl: x.l2TxMACControl.Load(),
		L2TxIPSpoofed: x.l2TxIPSpoofed.Load(), SetAddrRefused: x.setAddrRefused.Load(),
		RoCERx: x.roceRx.Load(), WQEErrors: x.wqeErrors.Load(),
		Fatal: x.fatal.Load(), CQOverflows: x.cqOverflows.Load(), EventsLost: x.eventsLost.Load()}
	if l := v.fabric; l != nil {
		st.FabricTransport = l.Transport()
		st.Counters.FabricTxLost, st.Counters.FabricRxMalformed = l.txLost.Load(), l.rxBad.Load()
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.sess
	if s == nil {
		return st
	}
	st.Guest, st.PeerID = true, s.peerID
	st.State, st.FatalCode = ctlsock.GuestState(&s.hdr.DevStatus, &s.hdr.FatalCode, DevLive, DevFatal)
	s.statMu.Lock()
	st.Objects = s.snap.objects
	st.QPs = append(st.QPs, s.snap.qps...)
	s.statMu.Unlock()
	st.Engine = s.rxDev.Load().Counters()
	return st
}

// Status returns the status of every vNIC.
func (s *Server) Status() Status {
	var st Status
	for _, v := range s.vnics {
		st.VNICs = append(st.VNICs, v.Status())
	}
	return st
}

// QueryStatus reads a backend's status from its control socket.
func QueryStatus(ctx context.Context, path string) (Status, error) {
	return ctlsock.Query[Status](ctx, path, "device", "hinic device serve")
}

// Spoofed is what the backend refused of the guest for another's
// address: L2 frames with another source MAC or an unpinned IPv4, ARP
// or IPv6 source, and SET_ADDR commands with an unpinned address.
func (c VNICCounters) Spoofed() uint64 { return c.L2TxSpoofed + c.L2TxIPSpoofed + c.SetAddrRefused }

// AdminCmds returns the admin commands the vNIC executed.
func (v VNICStatus) AdminCmds() uint64 { return v.Counters.AdminCmds }
