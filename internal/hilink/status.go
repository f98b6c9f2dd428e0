package hilink

import (
	"context"
	"time"

	"github.com/PacketFive/hinic/internal/ctlsock"
)

// Status is what `hinic link status` shows: the switch's settings and
// every port. The control socket answers with it as JSON.
type Status struct {
	RunDir   string       `json:"run_dir"`
	Credits  int          `json:"credits"`
	MaxFrame int          `json:"max_frame"`
	UptimeS  float64      `json:"uptime_s"`
	Ports    []PortStatus `json:"ports"`
}

// PortStatus is one port: its peer, the credit state of its session and
// its counters (which outlive sessions).
type PortStatus struct {
	Num   int    `json:"num"`
	Path  string `json:"path"`
	State string `json:"state"` // "up" with a peer, else "down"
	Peer  string `json:"peer,omitempty"`
	GPUs  []int  `json:"gpus,omitempty"`
	// TxCredits are the frames the switch may send the peer now, out of
	// the peer's PeerGrant.
	TxCredits int `json:"tx_credits"`
	PeerGrant int `json:"peer_grant"`
	// Held are frames received on the port still in the switch; Queued
	// frames waiting to go out of it.
	Held     int      `json:"held"`
	Queued   int      `json:"queued"`
	Counters Counters `json:"counters"`
}

// Counters of a port. Frames and bytes count every message but credit
// returns, dropped ones included.
type Counters struct {
	RxFrames     uint64            `json:"rx_frames"`
	RxBytes      uint64            `json:"rx_bytes"`
	TxFrames     uint64            `json:"tx_frames"`
	TxBytes      uint64            `json:"tx_bytes"`
	CreditsIn    uint64            `json:"credits_in"`    // returned by the peer
	CreditsOut   uint64            `json:"credits_out"`   // returned to the peer
	CreditStalls uint64            `json:"credit_stalls"` // times frames waited for the peer's credit
	Sessions     uint64            `json:"sessions"`
	Rejected     uint64            `json:"rejected"` // hellos refused, peers that sent none
	Drops        map[string]uint64 `json:"drops"`    // by reason
}

// DropsTotal is the sum of the drops.
func (c Counters) DropsTotal() uint64 {
	var n uint64
	for _, v := range c.Drops {
		n += v
	}
	return n
}

// Status returns the switch's status now.
func (sw *Switch) Status() Status {
	st := Status{RunDir: sw.cfg.RunDir, Credits: sw.cfg.Credits, MaxFrame: sw.cfg.MaxFrame,
		UptimeS: time.Since(sw.start).Seconds()}
	for _, p := range sw.ports {
		ps := PortStatus{Num: p.num, Path: p.path, State: "down", Counters: p.c.snapshot()}
		if s := p.session(); s != nil {
			ps.State, ps.Peer = "up", s.name
			for _, g := range s.gpus {
				ps.GPUs = append(ps.GPUs, int(g))
			}
			s.mu.Lock()
			ps.TxCredits, ps.PeerGrant, ps.Held, ps.Queued = s.txCredits, s.peerGrant, s.held, s.queued
			s.mu.Unlock()
		}
		st.Ports = append(st.Ports, ps)
	}
	return st
}

func (c *counters) snapshot() Counters {
	s := Counters{RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(), TxFrames: c.txFrames.Load(),
		TxBytes: c.txBytes.Load(), CreditsIn: c.creditsIn.Load(), CreditsOut: c.creditsOut.Load(),
		CreditStalls: c.creditStalls.Load(), Sessions: c.sessions.Load(), Rejected: c.rejected.Load(),
		Drops: map[string]uint64{}}
	for i := range c.drops {
		s.Drops[dropNames[i]] = c.drops[i].Load()
	}
	return s
}

// QueryStatus asks the switch serving the control socket at path.
func QueryStatus(ctx context.Context, path string) (Status, error) {
	return ctlsock.Query[Status](ctx, path, "hilink", "hinic link serve")
}
