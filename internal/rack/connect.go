package rack

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/PacketFive/hinic/internal/rdma"
)

// RoCETrafficClass is the GRH traffic class of the rack's RC connections:
// DSCP 26, which HiSwitch maps to its lossless class TC3 by default (the
// usual RoCE deployment); the engine sets ECT(0) itself.
const RoCETrafficClass = 26 << 2

// RCOptions shape an RC connection.
type RCOptions struct {
	BufSize     uint64 // bytes of registered memory on each side; default 1 MiB
	SendDepth   int    // send queue depth (perftest --tx-depth); default 128
	RecvDepth   int    // receive queue depth (perftest --rx-depth); default 512
	MaxInline   int    // default 0
	MaxRDAtomic uint8  // outstanding READs and atomics each way; default rdma.DefaultMaxQPRDAtomic (128)
	Timeout     uint8  // local ACK timeout code; default 14 (67 ms)
	RetryCnt    uint8  // default 7
	RNRRetry    uint8  // default 7 (infinite)
	MinRNRTimer uint8  // default 12 (0.64 ms)
	CQE         int    // completion queue entries; default SendDepth+RecvDepth
	// Events gives each CQ its own completion channel, so callers can wait
	// for completions instead of polling.
	Events bool
	// UC connects UC QPs instead of RC ones (ibv_uc_pingpong): SEND and
	// WRITE only, nothing acknowledged.
	UC bool
}

func (o *RCOptions) defaults() {
	if o.BufSize == 0 {
		o.BufSize = 1 << 20
	}
	if o.SendDepth == 0 {
		o.SendDepth = 128
	}
	if o.RecvDepth == 0 {
		o.RecvDepth = 512
	}
	if o.MaxRDAtomic == 0 {
		o.MaxRDAtomic = rdma.DefaultMaxQPRDAtomic
	}
	if o.Timeout == 0 {
		o.Timeout = 14
	}
	if o.RetryCnt == 0 {
		o.RetryCnt = 7
	}
	if o.RNRRetry == 0 {
		o.RNRRetry = 7
	}
	if o.MinRNRTimer == 0 {
		o.MinRNRTimer = 12
	}
	if o.CQE == 0 {
		o.CQE = o.SendDepth + o.RecvDepth
	}
}

// Endpoint is one side of an RC connection: its QP, CQs and a registered
// buffer, plus what it learned of its peer in the exchange.
type Endpoint struct {
	Host   *Host
	PD     *rdma.PD
	SendCQ *rdma.CQ
	RecvCQ *rdma.CQ
	// SendEvents and RecvEvents are the CQs' completion channels (nil
	// unless RCOptions.Events).
	SendEvents *rdma.CompChannel
	RecvEvents *rdma.CompChannel
	QP         *rdma.QP
	MR         *rdma.MR
	Buf        uint64 // address of the registered buffer
	Size       uint64

	RemoteBuf  uint64 // the peer's buffer address
	RemoteRKey uint32
}

// Close destroys the endpoint's verbs objects.
func (e *Endpoint) Close() error {
	return teardown{qps: []*rdma.QP{e.QP}, mr: e.MR, cqs: []*rdma.CQ{e.SendCQ, e.RecvCQ}, pd: e.PD}.
		run(e.Host, &e.Buf, &e.Size)
}

// teardown is what an endpoint holds, destroyed in dependency order: QPs,
// then the SRQ and AHs, the MR, the CQs, the PD; then the buffer goes
// back to the host. Nil members are skipped.
type teardown struct {
	qps []*rdma.QP
	srq *rdma.SRQ
	ahs []*rdma.AH
	mr  *rdma.MR
	cqs []*rdma.CQ
	pd  *rdma.PD
}

func (t teardown) run(h *Host, buf, size *uint64) error {
	var errs []error
	for _, qp := range t.qps {
		if qp != nil {
			errs = append(errs, qp.Destroy())
		}
	}
	if t.srq != nil {
		errs = append(errs, t.srq.Destroy())
	}
	for _, ah := range t.ahs {
		errs = append(errs, ah.Destroy())
	}
	if t.mr != nil {
		errs = append(errs, t.mr.Dereg())
	}
	for _, cq := range t.cqs {
		if cq != nil {
			errs = append(errs, cq.Destroy())
		}
	}
	if t.pd != nil {
		errs = append(errs, t.pd.Dealloc())
	}
	if *size != 0 {
		h.Free(*buf, *size)
		*buf, *size = 0, 0
	}
	return errors.Join(errs...)
}

// wire is what the two sides exchange out of band (perftest and the
// pingpong tools send the same over TCP): QPN, PSN, GID, buffer and rkey;
// the MAC stands in for the neighbour lookup the kernel does.
type wire struct {
	qpn  uint32
	psn  uint32
	gid  [16]byte
	mac  [6]byte
	buf  uint64
	rkey uint32
	lid  uint16 // InfiniBand
}

// ConnectRC creates an RC QP on a and one on b and connects them through
// INIT, RTR and RTS, exchanging what ibv_rc_pingpong exchanges. a and b may
// be the same host (loopback).
func ConnectRC(a, b *Host, opts RCOptions) (*Endpoint, *Endpoint, error) {
	opts.defaults()
	ea, err := newEndpoint(a, opts)
	if err != nil {
		return nil, nil, err
	}
	eb, err := newEndpoint(b, opts)
	if err != nil {
		ea.Close()
		return nil, nil, err
	}
	wa, err := ea.local()
	if err == nil {
		var wb wire
		if wb, err = eb.local(); err == nil {
			if err = ea.connect(wa, wb, opts); err == nil {
				err = eb.connect(wb, wa, opts)
			}
		}
	}
	if err != nil {
		ea.Close()
		eb.Close()
		return nil, nil, err
	}
	return ea, eb, nil
}

func newEndpoint(h *Host, o RCOptions) (*Endpoint, error) {
	if h.Device == nil {
		return nil, fmt.Errorf("rack: %s has no engine (raw rack)", h.Name)
	}
	e := &Endpoint{Host: h}
	fail := func(what string, err error) (*Endpoint, error) {
		e.Close()
		return nil, fmt.Errorf("rack: %s: %s: %w", h.Name, what, err)
	}
	var err error
	if e.Buf, err = h.Alloc(o.BufSize); err != nil {
		return nil, err
	}
	e.Size = o.BufSize
	d := h.Device
	if e.PD, err = d.AllocPD(); err != nil {
		return fail("alloc PD", err)
	}
	access := rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic
	if e.MR, err = d.RegMR(e.PD, e.Buf, o.BufSize, access); err != nil {
		return fail("register MR", err)
	}
	if o.Events {
		e.SendEvents, e.RecvEvents = d.NewCompChannel(), d.NewCompChannel()
	}
	if e.SendCQ, err = d.CreateCQ(o.CQE, e.SendEvents); err != nil {
		return fail("create send CQ", err)
	}
	if e.RecvCQ, err = d.CreateCQ(o.CQE, e.RecvEvents); err != nil {
		return fail("create recv CQ", err)
	}
	qt := rdma.QPTypeRC
	if o.UC {
		qt = rdma.QPTypeUC
	}
	e.QP, err = d.CreateQP(e.PD, rdma.QPInitAttr{
		SendCQ: e.SendCQ, RecvCQ: e.RecvCQ, QPType: qt,
		Cap: rdma.QPCap{MaxSendWR: o.SendDepth, MaxRecvWR: o.RecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: o.MaxInline},
	})
	if err != nil {
		return fail("create QP", err)
	}
	return e, nil
}

func (e *Endpoint) local() (wire, error) {
	idx := GIDIndex
	if e.Host.IB() {
		idx = 0
	}
	gid, err := e.Host.Device.QueryGID(idx)
	if err != nil {
		return wire{}, fmt.Errorf("rack: %s: GID %d: %w", e.Host.Name, idx, err)
	}
	return wire{qpn: e.QP.QPN(), psn: rand.Uint32() & 0xFFFFFF, gid: gid, mac: e.Host.MAC,
		buf: e.Buf, rkey: e.MR.RKey, lid: e.Host.LID()}, nil
}

func (e *Endpoint) connect(local, remote wire, o RCOptions) error {
	e.RemoteBuf, e.RemoteRKey = remote.buf, remote.rkey
	mtu := e.Host.Device.QueryPort().ActiveMTU
	av := rdma.AHAttr{IsGlobal: true, PortNum: 1, DMAC: remote.mac, GRH: rdma.GlobalRoute{
		DGID: remote.gid, SGIDIndex: GIDIndex, HopLimit: 64, TrafficClass: RoCETrafficClass}}
	if e.Host.IB() {
		av = rdma.AHAttr{DLID: remote.lid, PortNum: 1}
	}
	steps := []struct {
		name string
		attr rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{"INIT", rdma.QPAttr{QPState: rdma.QPStateInit, PKeyIndex: 0, PortNum: 1,
			QPAccessFlags: rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{"RTR", rdma.QPAttr{QPState: rdma.QPStateRTR, PathMTU: mtu, DestQPNum: remote.qpn, RQPSN: remote.psn,
			MaxDestRDAtomic: o.MaxRDAtomic, MinRNRTimer: o.MinRNRTimer, AHAttr: av},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
				rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
		{"RTS", rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: local.psn, Timeout: o.Timeout, RetryCnt: o.RetryCnt,
			RNRRetry: o.RNRRetry, MaxRDAtomic: o.MaxRDAtomic},
			rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
				rdma.QPAttrMaxQPRDAtomic},
	}
	if o.UC {
		// The UC column of the modify table: no READ/atomic limits, no
		// timers.
		steps[0].attr.QPAccessFlags = rdma.AccessRemoteWrite
		steps[1].mask &^= rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer
		steps[2].mask = rdma.QPAttrState | rdma.QPAttrSQPSN
	}
	for _, s := range steps {
		if err := e.QP.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("rack: %s: modify QP %d to %s: %w", e.Host.Name, e.QP.QPN(), s.name, err)
		}
	}
	return nil
}
