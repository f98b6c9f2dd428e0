package fabric

import (
	"fmt"
)

// Status is what `hinic fabric status` shows.
type Status struct {
	RunDir   string         `json:"run_dir"`
	Switches []SwitchStatus `json:"switches"`
}

// SwitchStatus is one switch's status.
type SwitchStatus struct {
	Name       string       `json:"name"`
	NodeGUID   string       `json:"node_guid"`
	Ports      []PortStatus `json:"ports"`
	FDB        []FDBEntry   `json:"fdb"`
	FDBFull    uint64       `json:"fdb_full,omitempty"` // learning refused: table full
	IB         *IBStatus    `json:"ib,omitempty"`
	AgingSecs  float64      `json:"aging_seconds"`
	Lossless   []int        `json:"lossless_tcs"`
	PCPToTC    []int        `json:"pcp_to_tc"`
	StrictTCs  []int        `json:"strict_tcs"`
	ETSWeights []int        `json:"ets_weights"`
}

// PortStatus is one port's state and counters.
type PortStatus struct {
	Num    int    `json:"num"`
	Kind   string `json:"kind"`
	Link   string `json:"link"`
	Socket string `json:"socket,omitempty"`
	Dial   string `json:"dial,omitempty"`
	MAC    string `json:"mac"`
	State  string `json:"state"` // "up" or "down"
	// Transport is how the frames of the session in progress travel:
	// "socket", "shm" (a shared-memory ring pair) or "stream" (QEMU);
	// empty while the port is down.
	Transport string   `json:"transport,omitempty"`
	Peer      PeerInfo `json:"peer"`
	Sessions  int      `json:"sessions"` // peers connected so far

	RxFrames  uint64            `json:"rx_frames"`
	RxBytes   uint64            `json:"rx_bytes"`
	TxFrames  uint64            `json:"tx_frames"`
	TxBytes   uint64            `json:"tx_bytes"`
	Drops     map[string]uint64 `json:"drops"`
	PFCSent   uint64            `json:"pfc_sent"`
	PFCRecv   uint64            `json:"pfc_received"`
	PauseRecv uint64            `json:"pause_received"`
	ECNMarked uint64            `json:"ecn_marked"`
	Floods    uint64            `json:"floods"`
	Faults    uint64            `json:"faults_injected"`
	// FaultKinds breaks Faults down by kind.
	FaultKinds FaultCounts `json:"faults"`
	// QueueFrames and QueueBytes are the egress queue depths per class.
	QueueFrames [NumTC]int   `json:"queue_frames"`
	QueueBytes  [NumTC]int64 `json:"queue_bytes"`
	// Paused lists the classes the peer has paused.
	Paused []int `json:"paused,omitempty"`
	// XOFF lists the classes this switch has paused at the peer.
	XOFF []int `json:"xoff,omitempty"`
	// Classes breaks the counters down by traffic class.
	Classes [NumTC]ClassCounters `json:"classes"`
	// Tunnel is a vxlan port's UDP side: addresses, VNI, link state,
	// datagram counters (tunnel.go).
	Tunnel *TunnelStatus `json:"tunnel,omitempty"`
}

// ClassCounters are a port's counters of one traffic class.
type ClassCounters struct {
	TxFrames  uint64 `json:"tx_frames"` // data frames sent (PFC frames not included)
	TxBytes   uint64 `json:"tx_bytes"`
	QueueFull uint64 `json:"queue_full_drops"` // tail drops of the egress queue
	ECNMarked uint64 `json:"ecn_marked"`
	PFCSent   uint64 `json:"pfc_sent"`     // PFC frames that paused or resumed the class at the peer
	PFCRecv   uint64 `json:"pfc_received"` // PFC frames from the peer that paused or resumed it
}

// FaultCounts are the faults a port injected, by kind (docs/fabric.md,
// fault injection). A duplicated or held frame that is also corrupted
// counts under both kinds.
type FaultCounts struct {
	Drop      uint64 `json:"drop"`
	Duplicate uint64 `json:"duplicate"`
	Reorder   uint64 `json:"reorder"`
	Corrupt   uint64 `json:"corrupt"`
}

// Add returns the sum of f and g.
func (f FaultCounts) Add(g FaultCounts) FaultCounts {
	return FaultCounts{Drop: f.Drop + g.Drop, Duplicate: f.Duplicate + g.Duplicate,
		Reorder: f.Reorder + g.Reorder, Corrupt: f.Corrupt + g.Corrupt}
}

// TotalDrops adds up the drops of every reason.
func (ps PortStatus) TotalDrops() uint64 {
	var n uint64
	for _, v := range ps.Drops {
		n += v
	}
	return n
}

// Status returns the fabric's status.
func (f *Fabric) Status() Status {
	st := Status{RunDir: f.cfg.RunDir}
	for _, sw := range f.switches {
		st.Switches = append(st.Switches, sw.Status())
	}
	return st
}

// Status returns the switch's status.
func (sw *Switch) Status() SwitchStatus {
	now := sw.clock.Now()
	ss := SwitchStatus{
		Name: sw.cfg.name, NodeGUID: fmt.Sprintf("%#016x", sw.cfg.nodeGUID),
		FDB: sw.fdb.snapshot(sw.nanotime(now)), FDBFull: sw.fdb.full.Load(),
		IB: sw.ibStatus(), AgingSecs: sw.cfg.aging.Seconds(),
	}
	for tc := range NumTC {
		if sw.cfg.lossless[tc] {
			ss.Lossless = append(ss.Lossless, tc)
		}
		if sw.cfg.strict[tc] {
			ss.StrictTCs = append(ss.StrictTCs, tc)
			ss.ETSWeights = append(ss.ETSWeights, 0)
		} else {
			ss.ETSWeights = append(ss.ETSWeights, sw.cfg.weights[tc])
		}
		ss.PCPToTC = append(ss.PCPToTC, int(sw.cfg.pcpToTC[tc]))
	}
	for _, p := range sw.ports {
		ss.Ports = append(ss.Ports, p.status())
	}
	return ss
}

func (p *port) status() PortStatus {
	ps := PortStatus{
		Num: p.cfg.num, Kind: p.cfg.kind, Link: p.cfg.link, MAC: macString(p.mac), State: "down",
		Drops: map[string]uint64{},
	}
	switch {
	case p.linked:
		ps.Kind = "link"
	case p.tun != nil:
		ps.Dial = p.cfg.tunnel.remote
		ps.Tunnel = p.tun.status(p.sw.clock.Now())
	case p.cfg.dial != "":
		ps.Dial = p.cfg.dial
	default:
		ps.Socket = p.cfg.path
	}
	p.mu.Lock()
	if p.sess != nil {
		ps.State = "up"
		ps.Peer = p.peer
		ps.Transport = p.sess.transport()
	}
	ps.Sessions = p.sessions
	p.mu.Unlock()
	c := &p.ctr
	ps.RxFrames, ps.RxBytes = c.rxFrames.Load(), c.rxBytes.Load()
	for r := range numDropReasons {
		ps.Drops[r.String()] = c.drops[r].Load()
	}
	ps.PFCRecv, ps.PauseRecv = c.pfcRx.Load(), c.pauseRx.Load()
	ps.Floods, ps.Faults = c.floods.Load(), c.faults.Load()
	ps.FaultKinds = FaultCounts{Drop: c.faultDrops.Load(), Duplicate: c.faultDups.Load(),
		Reorder: c.faultReorders.Load(), Corrupt: c.faultCorrupts.Load()}
	for tc := range NumTC {
		ps.Classes[tc] = ClassCounters{TxFrames: c.txClassFrames[tc].Load(), TxBytes: c.txClassBytes[tc].Load(),
			QueueFull: c.queueFullClass[tc].Load(), ECNMarked: c.ecnClass[tc].Load(),
			PFCSent: c.pfcTxClass[tc].Load(), PFCRecv: c.pfcRxClass[tc].Load()}
		cl := &ps.Classes[tc]
		ps.TxFrames += cl.TxFrames + cl.PFCSent
		ps.TxBytes += cl.TxBytes
		ps.PFCSent += cl.PFCSent
		ps.ECNMarked += cl.ECNMarked
	}
	ps.TxBytes += c.pfcTxBytes.Load()
	var paused uint8
	ps.QueueFrames, ps.QueueBytes, paused = p.eg.depth()
	for tc := range NumTC {
		if paused&(1<<tc) != 0 {
			ps.Paused = append(ps.Paused, tc)
		}
		if p.xoff[tc].Load() {
			ps.XOFF = append(ps.XOFF, tc)
		}
	}
	return ps
}
