package rack

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/rdma"
)

// UDOptions shape a UD endpoint.
type UDOptions struct {
	BufSize   uint64 // registered memory; default 1 MiB
	SendDepth int    // default 128
	RecvDepth int    // default 512
	QKey      uint32 // default 0x11111111 (ibv_ud_pingpong's)
	CQE       int    // default SendDepth+RecvDepth
	Events    bool   // completion channels on both CQs
}

func (o *UDOptions) defaults() {
	if o.BufSize == 0 {
		o.BufSize = 1 << 20
	}
	if o.SendDepth == 0 {
		o.SendDepth = 128
	}
	if o.RecvDepth == 0 {
		o.RecvDepth = 512
	}
	if o.QKey == 0 {
		o.QKey = 0x11111111
	}
	if o.CQE == 0 {
		o.CQE = o.SendDepth + o.RecvDepth
	}
}

// UDEndpoint is a UD QP in RTS with its CQs and a registered buffer.
type UDEndpoint struct {
	Host       *Host
	PD         *rdma.PD
	SendCQ     *rdma.CQ
	RecvCQ     *rdma.CQ
	SendEvents *rdma.CompChannel
	RecvEvents *rdma.CompChannel
	QP         *rdma.QP
	MR         *rdma.MR
	Buf        uint64
	Size       uint64
	QKey       uint32

	ahs []*rdma.AH
}

// NewUD creates a UD QP on h and takes it to RTS, as ibv_ud_pingpong does.
func NewUD(h *Host, o UDOptions) (*UDEndpoint, error) {
	o.defaults()
	if h.Device == nil {
		return nil, fmt.Errorf("rack: %s has no engine (raw rack)", h.Name)
	}
	e := &UDEndpoint{Host: h, QKey: o.QKey}
	fail := func(what string, err error) (*UDEndpoint, error) {
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
	if e.MR, err = d.RegMR(e.PD, e.Buf, o.BufSize, rdma.AccessLocalWrite); err != nil {
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
	if e.QP, err = d.CreateQP(e.PD, rdma.QPInitAttr{SendCQ: e.SendCQ, RecvCQ: e.RecvCQ, QPType: rdma.QPTypeUD,
		Cap: rdma.QPCap{MaxSendWR: o.SendDepth, MaxRecvWR: o.RecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fail("create QP", err)
	}
	for _, s := range []struct {
		name string
		attr rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{"INIT", rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: o.QKey},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
		{"RTR", rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
		{"RTS", rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: e.QP.QPN() * 17 & 0xFFFFFF}, rdma.QPAttrState | rdma.QPAttrSQPSN},
	} {
		if err := e.QP.Modify(&s.attr, s.mask); err != nil {
			return fail("modify QP to "+s.name, err)
		}
	}
	return e, nil
}

// AHTo returns an address handle for peer's host (its RoCEv2 IPv4 GID
// with the lossless traffic class, or its LID on InfiniBand), owned by e
// and destroyed by Close.
func (e *UDEndpoint) AHTo(peer *Host) (*rdma.AH, error) {
	av, err := e.Host.av(peer)
	if err != nil {
		return nil, err
	}
	return e.ah(av)
}

// GroupAH returns an address handle for the multicast group gid: on
// InfiniBand the group's MLID (only groups the rack programmed, such as
// IBAllHosts) with a GRH to the MGID.
func (e *UDEndpoint) GroupAH(gid [16]byte) (*rdma.AH, error) {
	if e.Host.IB() {
		mlid := e.Host.mcastLIDs[gid]
		if mlid == 0 {
			return nil, fmt.Errorf("rack: %s: the fabric has no multicast LID for group %x", e.Host.Name, gid)
		}
		return e.ah(rdma.AHAttr{DLID: mlid, IsGlobal: true, PortNum: 1, GRH: rdma.GlobalRoute{DGID: gid, HopLimit: 64}})
	}
	return e.ah(rdma.AHAttr{IsGlobal: true, PortNum: 1, GRH: rdma.GlobalRoute{
		DGID: gid, SGIDIndex: GIDIndex, HopLimit: 64, TrafficClass: RoCETrafficClass}})
}

func (e *UDEndpoint) ah(attr rdma.AHAttr) (*rdma.AH, error) {
	ah, err := e.Host.Device.CreateAH(e.PD, attr)
	if err != nil {
		return nil, fmt.Errorf("rack: %s: %w", e.Host.Name, err)
	}
	e.ahs = append(e.ahs, ah)
	return ah, nil
}

// SGE returns the scatter/gather element for n bytes at offset off of
// the endpoint's buffer.
func (e *UDEndpoint) SGE(off, n int) []rdma.SGE {
	return []rdma.SGE{{Addr: e.Buf + uint64(off), Length: uint32(n), LKey: e.MR.LKey}}
}

// Close destroys the endpoint's verbs objects (its QP leaves any groups).
func (e *UDEndpoint) Close() error {
	return teardown{qps: []*rdma.QP{e.QP}, ahs: e.ahs, mr: e.MR, cqs: []*rdma.CQ{e.SendCQ, e.RecvCQ}, pd: e.PD}.
		run(e.Host, &e.Buf, &e.Size)
}

// SRQOptions shape an SRQ endpoint: NumQP RC QPs that share one SRQ and
// one CQ, as ibv_srq_pingpong sets them up.
type SRQOptions struct {
	BufSize   uint64 // default 1 MiB
	NumQP     int    // default 16 (ibv_srq_pingpong -q)
	SRQDepth  int    // default 512
	SendDepth int    // per QP; default 16
	Events    bool
	RC        RCOptions // timers and retries of the connections (defaults as ConnectRC)
}

func (o *SRQOptions) defaults() {
	if o.BufSize == 0 {
		o.BufSize = 1 << 20
	}
	if o.NumQP == 0 {
		o.NumQP = 16
	}
	if o.SRQDepth == 0 {
		o.SRQDepth = 512
	}
	if o.SendDepth == 0 {
		o.SendDepth = 16
	}
	o.RC.defaults()
}

// SRQEndpoint is one side of ConnectSRQ.
type SRQEndpoint struct {
	Host   *Host
	PD     *rdma.PD
	CQ     *rdma.CQ // send and receive completions of every QP
	Events *rdma.CompChannel
	SRQ    *rdma.SRQ
	QPs    []*rdma.QP
	MR     *rdma.MR
	Buf    uint64
	Size   uint64
}

// SGE returns the scatter/gather element for n bytes at offset off.
func (e *SRQEndpoint) SGE(off, n int) []rdma.SGE {
	return []rdma.SGE{{Addr: e.Buf + uint64(off), Length: uint32(n), LKey: e.MR.LKey}}
}

// Close destroys the endpoint's verbs objects.
func (e *SRQEndpoint) Close() error {
	return teardown{qps: e.QPs, srq: e.SRQ, mr: e.MR, cqs: []*rdma.CQ{e.CQ}, pd: e.PD}.run(e.Host, &e.Buf, &e.Size)
}

func newSRQEndpoint(h *Host, o SRQOptions) (*SRQEndpoint, error) {
	if h.Device == nil {
		return nil, fmt.Errorf("rack: %s has no engine (raw rack)", h.Name)
	}
	e := &SRQEndpoint{Host: h}
	fail := func(what string, err error) (*SRQEndpoint, error) {
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
	if e.MR, err = d.RegMR(e.PD, e.Buf, o.BufSize, rdma.AccessLocalWrite|rdma.AccessRemoteWrite); err != nil {
		return fail("register MR", err)
	}
	if o.Events {
		e.Events = d.NewCompChannel()
	}
	if e.CQ, err = d.CreateCQ(o.SRQDepth+o.NumQP*o.SendDepth, e.Events); err != nil {
		return fail("create CQ", err)
	}
	if e.SRQ, err = d.CreateSRQ(e.PD, rdma.SRQInitAttr{MaxWR: o.SRQDepth, MaxSGE: 1}); err != nil {
		return fail("create SRQ", err)
	}
	for range o.NumQP {
		qp, err := d.CreateQP(e.PD, rdma.QPInitAttr{SendCQ: e.CQ, RecvCQ: e.CQ, QPType: rdma.QPTypeRC, SRQ: e.SRQ,
			Cap: rdma.QPCap{MaxSendWR: o.SendDepth, MaxSendSGE: 1}})
		if err != nil {
			return fail("create QP", err)
		}
		e.QPs = append(e.QPs, qp)
	}
	return e, nil
}

// ConnectSRQ creates NumQP RC QPs on each of a and b, each side's sharing
// one SRQ and one CQ, and connects QP i of a to QP i of b.
func ConnectSRQ(a, b *Host, o SRQOptions) (*SRQEndpoint, *SRQEndpoint, error) {
	o.defaults()
	ea, err := newSRQEndpoint(a, o)
	if err != nil {
		return nil, nil, err
	}
	eb, err := newSRQEndpoint(b, o)
	if err != nil {
		ea.Close()
		return nil, nil, err
	}
	for i := range o.NumQP {
		pa := &Endpoint{Host: a, QP: ea.QPs[i], MR: ea.MR, Buf: ea.Buf}
		pb := &Endpoint{Host: b, QP: eb.QPs[i], MR: eb.MR, Buf: eb.Buf}
		wa, err := pa.local()
		if err == nil {
			var wb wire
			if wb, err = pb.local(); err == nil {
				if err = pa.connect(wa, wb, o.RC); err == nil {
					err = pb.connect(wb, wa, o.RC)
				}
			}
		}
		if err != nil {
			ea.Close()
			eb.Close()
			return nil, nil, err
		}
	}
	return ea, eb, nil
}
