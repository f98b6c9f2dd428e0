package rdma

import (
	"math"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
)

// Congestion control for RoCEv2 (DCQCN: Zhu et al., "Congestion Control
// for Large-Scale RDMA Deployments", SIGCOMM 2015; IBTA Annex A17.9).
//
// Notification point (every device, always on): an RC request or
// response that arrives with the IP ECN field CE makes the device send a
// CNP (BTH opcode 0x81, BECN, 16 reserved bytes) to the QP that sent it,
// at most one per QP every DeviceConfig.CNPInterval.
//
// Reaction point (DeviceConfig.DCQCN, off by default): a CNP cuts the
// sending QP's rate, Rt = Rc, Rc = Rc(1 - α/2), α = (1-g)α + g; without
// CNPs α decays every AlphaPeriod and the rate recovers in steps driven by
// a timer (IncreasePeriod) and a byte counter (ByteCounter): fast recovery
// Rc = (Rt+Rc)/2 for the first F steps of both, then additive (Rt += AI)
// and hyper increase (Rt += i·HAI). Request packets are paced at Rc; at
// the line rate the QP is unlimited again. Time-driven updates are
// computed lazily from the Clock when the QP sends or gets a CNP, so an
// idle QP costs nothing.

// DCQCNConfig are the reaction point's parameters. Zero fields take the
// defaults in brackets (NVIDIA ConnectX defaults where they exist).
type DCQCNConfig struct {
	LineRate       float64       // bytes/s a QP starts at [12.5e9: 100 Gb/s]
	MinRate        float64       // bytes/s a QP never goes below [125e3: 1 Mb/s]
	G              float64       // α gain g [5/1024: α keeps 1019/1024 per period]
	AlphaPeriod    time.Duration // α decay period [1 µs]
	IncreasePeriod time.Duration // rate-increase timer [300 µs]
	ByteCounter    int           // rate-increase byte counter [32767 bytes]
	F              int           // fast-recovery steps [5]
	AI             float64       // additive increase, bytes/s [625e3: 5 Mb/s]
	HAI            float64       // hyper increase, bytes/s [6.25e6: 50 Mb/s]
	DecreasePeriod time.Duration // minimum time between two cuts [4 µs]
}

func (c *DCQCNConfig) defaults() {
	deff := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	deft := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	deff(&c.LineRate, 12.5e9)
	deff(&c.MinRate, 125e3)
	deff(&c.G, 5.0/1024)
	deft(&c.AlphaPeriod, time.Microsecond)
	deft(&c.IncreasePeriod, 300*time.Microsecond)
	if c.ByteCounter <= 0 {
		c.ByteCounter = 32767
	}
	if c.F <= 0 {
		c.F = 5
	}
	deff(&c.AI, 625e3)
	deff(&c.HAI, 6.25e6)
	deft(&c.DecreasePeriod, 4*time.Microsecond)
}

// DefaultCNPInterval is the notification point's minimum time between two
// CNPs to one QP (the DCQCN paper's 50 µs).
const DefaultCNPInterval = 50 * time.Microsecond

// cnpTrafficClass is the GRH traffic class of CNPs: DSCP 48, which
// switches commonly give priority (HiSwitch maps it to TC 6).
const cnpTrafficClass = 48 << 2

// dcqcnState is a QP's congestion state (engine-owned).
type dcqcnState struct {
	limited      bool // Rc below the line rate: pacing applies
	rc, rt       float64
	alpha        float64
	lastAlpha    time.Time
	lastIncrease time.Time
	lastDecrease time.Time
	bytes        int
	tStage       int
	bStage       int
	nextSend     time.Time
	paceTimer    clock.Timer

	lastCNP time.Time // notification point: the last CNP this QP sent
}

// onCE runs when an RC packet for qp arrived with CE: the notification
// point answers with a CNP, rate-limited per QP.
func (qp *QP) onCE() {
	d := qp.dev
	d.ctr.ceReceived.Add(1)
	if qp.path.f.Eth.Dst == ([6]byte{}) {
		return // no path back (the QP never reached RTR)
	}
	now := d.clock.Now()
	if !qp.dc.lastCNP.IsZero() && now.Sub(qp.dc.lastCNP) < d.cfg.CNPInterval {
		d.ctr.cnpsSuppressed.Add(1)
		return
	}
	qp.dc.lastCNP = now
	f := qp.path.f
	f.SetCNP(qp.attr.DestQPNum, pkeyDefault)
	p := qp.path
	p.tc = cnpTrafficClass
	fb, _ := qp.txBeginOn(&p, &f, false)
	qp.txEndOn(&p, &f, fb, nil)
	d.ctr.cnpsSent.Add(1)
}

// onCNP runs when a CNP for qp arrived: the reaction point cuts the rate.
func (qp *QP) onCNP() {
	d := qp.dev
	d.ctr.cnpsReceived.Add(1)
	c := d.cfg.DCQCN
	if c == nil {
		return
	}
	s := &qp.dc
	now := d.clock.Now()
	qp.dcqcnAdvance(now)
	if !s.limited {
		s.rc, s.rt, s.alpha = c.LineRate, c.LineRate, 1023.0/1024
		s.lastAlpha, s.lastIncrease = now, now
		s.nextSend = now
	}
	s.alpha = (1-c.G)*s.alpha + c.G
	s.lastAlpha = now
	if s.limited && now.Sub(s.lastDecrease) < c.DecreasePeriod {
		return
	}
	s.limited = true
	s.rt = s.rc
	s.rc = max(s.rc*(1-s.alpha/2), c.MinRate)
	s.lastDecrease, s.lastIncrease = now, now
	s.bytes, s.tStage, s.bStage = 0, 0, 0
	d.ctr.rateDecreases.Add(1)
}

// dcqcnAdvance applies the time-driven updates due by now: α decay and
// timer-driven increase steps.
func (qp *QP) dcqcnAdvance(now time.Time) {
	s := &qp.dc
	c := qp.dev.cfg.DCQCN
	if !s.limited {
		return
	}
	if n := now.Sub(s.lastAlpha) / c.AlphaPeriod; n > 0 {
		s.alpha *= math.Pow(1-c.G, float64(n))
		s.lastAlpha = s.lastAlpha.Add(n * c.AlphaPeriod)
	}
	if n := now.Sub(s.lastIncrease) / c.IncreasePeriod; n > 0 {
		s.lastIncrease = s.lastIncrease.Add(n * c.IncreasePeriod)
		for range min(int(n), 1000) {
			s.tStage++
			if qp.dcqcnIncrease() {
				return
			}
		}
	}
}

// dcqcnIncrease is one rate-increase step; it reports whether the QP is
// back at the line rate (unlimited).
func (qp *QP) dcqcnIncrease() bool {
	s := &qp.dc
	c := qp.dev.cfg.DCQCN
	lo, hi := min(s.tStage, s.bStage), max(s.tStage, s.bStage)
	switch {
	case hi < c.F: // fast recovery
	case lo >= c.F: // hyper increase
		s.rt += float64(lo-c.F+1) * c.HAI
	default: // additive increase
		s.rt += c.AI
	}
	s.rt = min(s.rt, c.LineRate)
	s.rc = (s.rt + s.rc) / 2
	if c.LineRate-s.rc < c.AI {
		s.limited = false
		qp.dev.ctr.rateRecoveries.Add(1)
		return true
	}
	return false
}

// dcqcnPace reports whether qp may send a packet of n bytes now; when not,
// a timer reschedules the QP. It accounts the packet when it may.
func (qp *QP) dcqcnPace(n int) bool {
	s := &qp.dc
	if !s.limited {
		return true
	}
	now := qp.dev.clock.Now()
	qp.dcqcnAdvance(now)
	if !s.limited {
		return true
	}
	if now.Before(s.nextSend) {
		if s.paceTimer == nil {
			e := &qp.dev.eng
			s.paceTimer = qp.dev.clock.AfterFunc(s.nextSend.Sub(now), func() { e.signal(qp, evPace) })
		}
		qp.dev.ctr.pacingStalls.Add(1)
		return false
	}
	if s.nextSend.Before(now) {
		s.nextSend = now
	}
	s.nextSend = s.nextSend.Add(time.Duration(float64(n) / s.rc * 1e9))
	s.bytes += n
	for c := qp.dev.cfg.DCQCN; s.bytes >= c.ByteCounter && s.limited; {
		s.bytes -= c.ByteCounter
		s.bStage++
		qp.dcqcnIncrease()
	}
	return true
}

// stopPace cancels a pending pacing timer (engine).
func (qp *QP) stopPace() {
	if t := qp.dc.paceTimer; t != nil {
		t.Stop()
		qp.dc.paceTimer = nil
	}
}

// Rate returns the QP's current DCQCN sending rate in bytes per second,
// or 0 when it is not limited (DCQCN off, no CNP yet, or recovered to the
// line rate).
func (qp *QP) Rate() float64 {
	var r float64
	qp.dev.eng.do(func() {
		if qp.dc.limited {
			qp.dcqcnAdvance(qp.dev.clock.Now())
		}
		if qp.dc.limited {
			r = qp.dc.rc
		}
	})
	return r
}

// isCE reports whether pkt's IP header carries the CE codepoint.
func isCE(pkt *proto.Packet) bool {
	if pkt.IPv4 != nil {
		return pkt.IPv4.ECN() == proto.ECNCE
	}
	return pkt.IPv6 != nil && pkt.IPv6.ECN() == proto.ECNCE
}
