package rdma

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/proto"
)

// QPCap are the queue sizes of a QP (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr are the creation attributes of a QP (struct
// ibv_qp_init_attr).
type QPInitAttr struct {
	SendCQ   *CQ
	RecvCQ   *CQ
	Cap      QPCap
	QPType   QPType
	SQSigAll bool // every send WR completes with a CQE, signaled or not
	// SRQ, when set, is where the QP takes its receive WRs; the QP has no
	// receive queue of its own (Cap.MaxRecvWR/MaxRecvSGE are ignored and
	// PostRecv fails).
	SRQ *SRQ
	// XRCD is the XRC domain of an XRC target QP (QPTypeXRCTgt, which
	// has no PD, CQs or queues: each request picks an XRC SRQ of the
	// domain). An XRC initiator (QPTypeXRCIni) has a PD and a send CQ
	// only.
	XRCD *XRCD
	// OnRecvLow, when set, runs on the engine's goroutine whenever a
	// receive WR of the QP's own receive queue is retired and fewer than
	// RecvLow remain posted, and when the QP enters ERR. A device that
	// feeds the queue from a ring of its own fetches the ring again then
	// (device: receive doorbells it does not need). It must not block or
	// call back into the QP but for PostRecv.
	OnRecvLow func()
	RecvLow   int
	// OnRecvEmpty, when set, runs on the engine's goroutine when a
	// message finds the QP's own receive queue empty. It may post
	// receives (PostRecv, nothing else of the QP) and reports whether it
	// did; the engine then looks again before it answers RNR or drops
	// the message. A device that feeds the queue from a ring of its own
	// fetches what was posted there and not yet taken.
	OnRecvEmpty func() bool
}

// GlobalRoute is the GRH part of an address vector (struct ibv_global_route).
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr plus the RoCE DMAC).
// RoCE needs IsGlobal and the GRH; DLID, SL, SrcPathBits and StaticRate are
// kept but unused on Ethernet.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	PortNum     uint8
	// DMAC is the next-hop MAC. The kernel resolves it in real life; here
	// the caller (the device backend from the guest's AH, the rack
	// harness, a test) does. It may be zero only for a destination on this
	// device (loopback).
	DMAC [6]byte
}

// QPAttr are the modifiable attributes of a QP (struct ibv_qp_attr).
type QPAttr struct {
	QPState          QPState
	CurQPState       QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    Access
	Cap              QPCap
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRDAtomic      uint8
	MaxDestRDAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
}

// SGE is a scatter/gather element (struct ibv_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr, flattened).
type SendWR struct {
	WRID      uint64
	SGList    []SGE
	Opcode    WROpcode
	SendFlags SendFlags
	// ImmData is sent big-endian in the ImmDt header and shows up as the
	// same number in the receiver's WC.ImmData. SEND_WITH_INV and
	// LOCAL_INV carry the R_Key to invalidate here (ibv_send_wr's
	// invalidate_rkey shares imm_data).
	ImmData    uint32
	RemoteAddr uint64 // RDMA and atomic operations
	RKey       uint32
	CompareAdd uint64 // atomics: compare (CMP_AND_SWP) or add (FETCH_AND_ADD)
	Swap       uint64 // atomics: swap value (CMP_AND_SWP)

	// UD: the destination of this datagram (ibv_send_wr.wr.ud). AH must
	// belong to the QP's PD. RemoteQKey with its high bit set means "use
	// the QP's own Q_Key" (IBA 10.2.5). A multicast AH sends to the group
	// and ignores RemoteQPN (the packet carries QPN 0xFFFFFF).
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32

	// BIND_MW (RC): the window, its new R_Key and what it covers.
	Bind MWBind
	// RemoteSRQN is, on an XRC initiator QP, the number of the XRC SRQ
	// at the target the request is for (ibv_send_wr.qp_type.xrc); it
	// travels in every request packet's XRCETH.
	RemoteSRQN uint32
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

// sendWQE is one send-queue slot. The fields up to the engine marker are
// written by PostSend before it publishes the slot (QP.sqProd) and are
// read-only afterwards; the rest belong to the engine goroutine.
type sendWQE struct {
	wrID       uint64
	opcode     WROpcode
	flags      SendFlags
	imm        uint32
	remoteAddr uint64
	rkey       uint32
	compareAdd uint64 // atomics: compare (CMP_AND_SWP) or add (FETCH_AND_ADD) operand
	swap       uint64 // atomics: swap operand (CMP_AND_SWP)
	ah         *AH    // UD destination
	remoteQPN  uint32 // UD
	remoteSRQN uint32 // XRC initiator: the XRCETH's SRQ number
	remoteQKey uint32 // UD: the Q_Key to send (high bit: the QP's own)
	bind       MWBind // BIND_MW
	length     uint32
	sge        []SGE  // view of sgeBuf
	inline     []byte // view of inlineBuf when SendInline
	isInline   bool

	sgeBuf    []SGE  // grown as posts need, up to MaxSendSGE
	inlineBuf []byte // grown as posts need, up to MaxInlineData

	// Engine-owned.
	mrs       []*MR // resolved lkeys, one per SGE (mrSlots)
	errStatus WCStatus
	readOut   bool // a READ or atomic counted in reqState.outReads
	firstPSN  proto.PSN
	lastPSN   proto.PSN
	nextPSN   proto.PSN // next packet to (re)send
	respPSN   proto.PSN // READ or atomic: next response PSN expected
	tm        uint8     // a device-made tag-matching WQE (tmSend*), no CQE of its own
}

func (w *sendWQE) isRead() bool { return w.opcode == WRRDMARead }

// isLocal reports whether w is a local operation (BIND_MW, LOCAL_INV):
// it sends nothing and has no PSN.
func (w *sendWQE) isLocal() bool { return wrInfo(w.opcode).local }

func (w *sendWQE) isAtomic() bool {
	return w.opcode == WRAtomicCmpAndSwp || w.opcode == WRAtomicFetchAndAdd
}

// hasResponse reports whether the responder answers w with data (READ
// responses or an ATOMIC ACKNOWLEDGE; for ATOMIC WRITE a READ RESPONSE
// without data) rather than a plain ACK: such
// requests count against max_rd_atomic and are reissued when an ACK shows
// their responses were lost (IBA 9.7.4.1).
func (w *sendWQE) hasResponse() bool { return wrInfo(w.opcode).response }

// recvWQE is one receive-queue slot; same ownership rule as sendWQE.
type recvWQE struct {
	wrID   uint64
	sge    []SGE
	length uint64
	sgeBuf []SGE // grown as posts need, up to the queue's max SGE

	mrs []*MR // engine-owned: resolved when a SEND starts filling it (mrSlots)
}

// mrSlots returns m with room for n resolved lkeys, allocating only when
// a WR has more SGEs than any before it in the slot: the per-WR arrays
// of a queue cost memory as they are used, not at its creation (a guest
// of the device backend sizes the queues).
func mrSlots(m []*MR, n int) []*MR {
	if cap(m) < n {
		return make([]*MR, n)
	}
	return m[:n]
}

// sgeSlots is mrSlots for a slot's SGE buffer (the poster's).
func sgeSlots(s []SGE, n int) []SGE {
	if cap(s) < n {
		return make([]SGE, n)
	}
	return s[:n]
}

// QP is a queue pair: reliable connected (RC) or unreliable datagram (UD).
//
// Ownership: PostSend, PostRecv, Modify, Query, Destroy, QPN and State are
// safe for concurrent use. The send and receive rings are shared: posters
// fill slots under sqMu/rqMu and publish them with an atomic producer
// index, the engine consumes them and publishes the consumer index. Every
// other field below the engine marker (attributes, PSNs, timers, responder
// state) belongs to the device's engine goroutine; Modify and Query reach
// it by running on that goroutine.
type QP struct {
	dev    *Device
	pd     *PD
	qpn    uint32
	init   QPInitAttr
	sendCQ *CQ
	recvCQ *CQ

	state atomic.Uint32 // QPState; stored by the engine only

	sqMu   sync.Mutex
	sq     slots[sendWQE]
	sqProd atomic.Uint32 // WQEs posted (free-running)
	sqCons atomic.Uint32 // WQEs completed (free-running)

	rqMu   sync.Mutex
	rq     slots[recvWQE]
	rqProd atomic.Uint32
	rqCons atomic.Uint32

	srq  *SRQ  // shared receive queue, or nil
	xrcd *XRCD // XRC target: its domain

	events atomic.Uint32 // pending engine events (ev* bits)

	snapMu sync.Mutex
	snap   QPAttr // attributes after the last Modify, for Query after Close

	// Engine-owned.
	attr      QPAttr
	destroyed bool
	path      txPath
	pmtu      int
	req       reqState
	resp      respState
	// readRes holds the most recent READ requests for replaying duplicates
	// (IBA 9.7.5: a duplicate READ is answered again from memory): the
	// device's MaxQPRDAtomic of them, the most max_dest_rd_atomic can be.
	readRes []readRes
	// backlog holds request frames that arrived while READ responses
	// were still going out (see replyStep); they own their buffers.
	backlog    []*frameBuf
	backHead   int // backlog[backHead:] are waiting
	inSendList bool
	inAckList  bool
	// srqWQE holds the WR taken from the SRQ for the message being
	// received (srqHeld); the SRQ slot itself is free again at once.
	srqWQE  recvWQE
	srqHeld bool
	// xsrq is an XRC target's SRQ for the request being handled (the one
	// its XRCETH named, xrcSelect); engine-owned.
	xsrq *SRQ
	// mcast are the groups the QP is attached to (UD).
	mcast [][16]byte
	// flowsGone: Destroy removed the raw QP's flows; guarded by
	// Device.mu (raw.go).
	flowsGone bool
	// rss is an RSS QP's indirection table and hash (raw.go).
	rss atomic.Pointer[rssConf]
	// dc is the congestion state (dcqcn.go).
	dc dcqcnState
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// State returns the QP's current state.
func (qp *QP) State() QPState { return QPState(qp.state.Load()) }

func ringSize(n int) (int, uint32) {
	if n < 1 {
		n = 1
	}
	size := 1 << bits.Len(uint(n-1))
	return size, uint32(size - 1)
}

// CreateQP creates a QP in the RESET state: RC or UD with the next free
// number, or the special QP0 (QPTypeSMI, InfiniBand only) or QP1
// (QPTypeGSI), one of each per device. The special QPs have UD semantics;
// the device's own SMA and PMA answer the requests for this port, and the
// consumer gets everything else (answers to its requests, other classes).
func (d *Device) CreateQP(pd *PD, attr QPInitAttr) (*QP, error) {
	tgt := attr.QPType == QPTypeXRCTgt
	if tgt {
		// An XRC target has no PD: the SRQ of each request supplies it.
		if d.closed.Load() {
			return nil, ErrClosed
		}
		if err := d.checkXRCD(attr.XRCD); err != nil {
			return nil, fmt.Errorf("rdma: create XRC target QP: %w", err)
		}
		if attr.SRQ != nil || attr.SendCQ != nil || attr.RecvCQ != nil {
			return nil, fmt.Errorf("rdma: create XRC target QP: it takes no SRQ or CQs: %w", ErrInvalid)
		}
		pd = nil
		attr.Cap = QPCap{}
	} else if err := d.checkPD(pd); err != nil {
		return nil, fmt.Errorf("rdma: create QP: %w", err)
	} else if attr.XRCD != nil {
		return nil, fmt.Errorf("rdma: create QP: only an XRC target QP takes an XRCD: %w", ErrInvalid)
	}
	if attr.QPType == QPTypeXRCIni {
		if attr.SRQ != nil {
			return nil, fmt.Errorf("rdma: create XRC initiator QP: it takes no SRQ: %w", ErrInvalid)
		}
		attr.RecvCQ = nil // send side only
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0
	}
	switch attr.QPType {
	case QPTypeRC, QPTypeUC, QPTypeUD, QPTypeGSI, QPTypeXRCIni, QPTypeXRCTgt:
	case QPTypeSMI:
		if !d.ib() {
			return nil, fmt.Errorf("rdma: create QP: QP0 exists only on an InfiniBand port: %w", ErrInvalid)
		}
	case QPTypeRawPacket:
		if d.ib() {
			return nil, fmt.Errorf("rdma: create QP: raw packet QPs exist only on an Ethernet port: %w", ErrInvalid)
		}
		if attr.SRQ != nil {
			return nil, fmt.Errorf("rdma: create raw packet QP: it takes no SRQ: %w", ErrInvalid)
		}
	default:
		return nil, fmt.Errorf("rdma: create QP: unknown type %d: %w", uint32(attr.QPType), ErrInvalid)
	}
	if srq := attr.SRQ; srq != nil {
		if srq.dev != d || srq.dead.Load() {
			return nil, fmt.Errorf("rdma: create QP: SRQ is not valid on this device: %w", ErrInvalid)
		}
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0
	}
	switch {
	case tgt:
	case attr.QPType == QPTypeXRCIni:
		if attr.SendCQ == nil || attr.SendCQ.dev != d {
			return nil, fmt.Errorf("rdma: create XRC initiator QP: a send CQ of this device is required: %w", ErrInvalid)
		}
	case attr.QPType == QPTypeRawPacket && attr.Cap.MaxSendWR == 0 && attr.Cap.MaxRecvWR == 0:
		// An RSS QP (raw.go): no queues, so no CQs.
		attr.SendCQ, attr.RecvCQ = nil, nil
	default:
		for _, cq := range []*CQ{attr.SendCQ, attr.RecvCQ} {
			if cq == nil || cq.dev != d {
				return nil, fmt.Errorf("rdma: create QP: send and receive CQs of this device are required: %w", ErrInvalid)
			}
		}
	}
	c := &attr.Cap
	lim := &d.cfg
	switch {
	case c.MaxSendWR < 0 || c.MaxSendWR > lim.MaxQPWR:
		return nil, fmt.Errorf("rdma: create QP: MaxSendWR %d outside 0..%d: %w", c.MaxSendWR, lim.MaxQPWR, ErrInvalid)
	case c.MaxRecvWR < 0 || c.MaxRecvWR > lim.MaxQPWR:
		return nil, fmt.Errorf("rdma: create QP: MaxRecvWR %d outside 0..%d: %w", c.MaxRecvWR, lim.MaxQPWR, ErrInvalid)
	case c.MaxSendSGE < 0 || c.MaxSendSGE > lim.MaxSGE:
		return nil, fmt.Errorf("rdma: create QP: MaxSendSGE %d outside 0..%d: %w", c.MaxSendSGE, lim.MaxSGE, ErrInvalid)
	case c.MaxRecvSGE < 0 || c.MaxRecvSGE > lim.MaxSGE:
		return nil, fmt.Errorf("rdma: create QP: MaxRecvSGE %d outside 0..%d: %w", c.MaxRecvSGE, lim.MaxSGE, ErrInvalid)
	case c.MaxInlineData < 0 || c.MaxInlineData > lim.MaxInline:
		return nil, fmt.Errorf("rdma: create QP: MaxInlineData %d outside 0..%d: %w", c.MaxInlineData, lim.MaxInline, ErrInvalid)
	}
	// Like providers, hand out at least one SGE per WR.
	c.MaxSendSGE = max(c.MaxSendSGE, 1)
	c.MaxRecvSGE = max(c.MaxRecvSGE, 1)

	qp := &QP{dev: d, pd: pd, init: attr, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ, xrcd: attr.XRCD}
	// Slots, and their SGE and inline buffers, come with the posts.
	sqSlots := c.MaxSendWR
	if attr.SRQ != nil && attr.SRQ.tm != nil {
		sqSlots += tmRndvSendWQEs // the device's rendezvous READs and FINs
	}
	qp.sq, qp.rq = newSlots[sendWQE](sqSlots), newSlots[recvWQE](c.MaxRecvWR)
	if attr.SRQ != nil {
		qp.srqWQE.sgeBuf = make([]SGE, attr.SRQ.maxSGE)
		qp.srqWQE.mrs = make([]*MR, attr.SRQ.maxSGE)
	}
	if tgt { // any SRQ of the domain may supply the WR
		qp.srqWQE.sgeBuf = make([]SGE, max(d.cfg.MaxSRQSGE, 1))
		qp.srqWQE.mrs = make([]*MR, max(d.cfg.MaxSRQSGE, 1))
	}
	qp.readRes = make([]readRes, max(d.cfg.MaxQPRDAtomic, 1))
	qp.attr.PortNum = 1
	qp.attr.PathMTU = d.activeMTU
	qp.attr.Cap = *c

	if qp.isUD() {
		qp.pmtu = d.activeMTU.Bytes()
	}

	d.mu.Lock()
	if d.nQP >= d.cfg.MaxQP {
		d.mu.Unlock()
		return nil, fmt.Errorf("rdma: create QP: %d QPs exist (MaxQP): %w", d.nQP, ErrNoResources)
	}
	if attr.SRQ != nil {
		if attr.SRQ.dead.Load() {
			d.mu.Unlock()
			return nil, fmt.Errorf("rdma: create QP: SRQ destroyed: %w", ErrInvalid)
		}
		attr.SRQ.refs.Add(1)
	}
	if tgt {
		if attr.XRCD.dead.Load() {
			d.mu.Unlock()
			return nil, fmt.Errorf("rdma: create XRC target QP: XRCD deallocated: %w", ErrInvalid)
		}
		attr.XRCD.refs.Add(1)
	}
	if special := attr.QPType == QPTypeSMI || attr.QPType == QPTypeGSI; special {
		qp.qpn = uint32(attr.QPType)
		if d.qpnUsed[qp.qpn] {
			d.mu.Unlock()
			if attr.SRQ != nil {
				attr.SRQ.refs.Add(-1)
			}
			return nil, fmt.Errorf("rdma: create QP: QP%d exists: %w", qp.qpn, ErrBusy)
		}
	} else {
		for d.qpnUsed[d.nextQPN] || d.nextQPN < firstQPN {
			d.nextQPN = (d.nextQPN + 1) & proto.QPNMask
		}
		qp.qpn = d.nextQPN
		d.nextQPN = (d.nextQPN + 1) & proto.QPNMask
	}
	d.qpnUsed[qp.qpn] = true
	d.nQP++
	for _, r := range qp.refCounts() {
		r.Add(1)
	}
	d.mu.Unlock()

	if err := d.eng.do(func() { d.eng.qps[qp.qpn] = qp }); err != nil {
		qp.release()
		return nil, fmt.Errorf("rdma: create QP: %w", err)
	}
	return qp, nil
}

// release returns the QP's number and references (control path).
func (qp *QP) release() {
	d := qp.dev
	d.mu.Lock()
	delete(d.qpnUsed, qp.qpn)
	d.nQP--
	for _, r := range qp.refCounts() {
		r.Add(-1)
	}
	if qp.srq != nil {
		qp.srq.refs.Add(-1)
	}
	if qp.xrcd != nil {
		qp.xrcd.refs.Add(-1)
	}
	d.mu.Unlock()
}

// refCounts are the reference counts of the PD and CQs the QP holds
// (XRC QPs lack some of them).
func (qp *QP) refCounts() []*atomic.Int32 {
	var r []*atomic.Int32
	if qp.pd != nil {
		r = append(r, &qp.pd.refs)
	}
	if qp.sendCQ != nil {
		r = append(r, &qp.sendCQ.refs)
	}
	if qp.recvCQ != nil {
		r = append(r, &qp.recvCQ.refs)
	}
	return r
}

// Destroy destroys the QP. Outstanding work is discarded without
// completions (ibv_destroy_qp); packets for its number are dropped as
// unknown-QP from then on.
func (qp *QP) Destroy() error {
	d := qp.dev
	var err error
	if e := d.eng.do(func() {
		if qp.destroyed {
			err = fmt.Errorf("rdma: destroy QP %#x: already destroyed: %w", qp.qpn, ErrInvalid)
			return
		}
		qp.destroyed = true
		qp.stopTimers()
		qp.dropBacklog()
		qp.detachAll()
		delete(d.eng.qps, qp.qpn)
		d.dropFlows(qp)
	}); e != nil {
		return fmt.Errorf("rdma: destroy QP %#x: %w", qp.qpn, e)
	}
	if err == nil {
		qp.release()
	}
	return err
}

// Query returns the QP's attributes and creation attributes
// (ibv_query_qp). It reads them on the engine goroutine, so they are
// consistent with the traffic; after Close it returns the attributes as
// the last Modify left them, with the state ERR.
func (qp *QP) Query() (QPAttr, QPInitAttr) {
	var a QPAttr
	err := qp.dev.eng.do(func() {
		a = qp.attr
		if qp.State() == QPStateSQD && qp.req.compIdx != qp.req.startIdx {
			a.SQDraining = 1
		}
	})
	if err != nil {
		qp.snapMu.Lock()
		a = qp.snap
		qp.snapMu.Unlock()
	}
	a.QPState = qp.State()
	a.CurQPState = a.QPState
	init := qp.init
	init.Cap = a.Cap
	return a, init
}

// snapshot records the attributes for Query after Close (engine).
func (qp *QP) snapshot() {
	qp.snapMu.Lock()
	qp.snap = qp.attr
	qp.snapMu.Unlock()
}

// handleEvents runs on the engine for the events signaled to qp.
func (qp *QP) handleEvents(ev uint32) {
	e := &qp.dev.eng
	st := qp.State()
	if ev&evRetry != 0 {
		qp.req.timer = nil
		qp.onRetryTimer()
	}
	if ev&evRNR != 0 {
		qp.req.rnrTimer = nil
		qp.onRNRTimer()
	}
	if ev&evPace != 0 {
		qp.dc.paceTimer = nil
		e.schedule(qp)
	}
	if ev&evSQ != 0 {
		if st == QPStateErr {
			qp.flushSQ()
		} else {
			e.schedule(qp)
		}
	}
	if ev&evRQ != 0 && st == QPStateErr {
		qp.flushRQ()
	}
}

func (qp *QP) setState(s QPState) { qp.state.Store(uint32(s)) }

// enterError moves the QP to ERR (IBA 10.3: on a fatal error or by
// Modify) and completes all outstanding work with WRFlushErr.
func (qp *QP) enterError() {
	if qp.State() == QPStateErr {
		return
	}
	qp.setState(QPStateErr)
	qp.stopTimers()
	qp.dropBacklog()
	qp.req.rnrWait = false
	qp.resp.ackPending = false
	qp.resp.op = respIdle
	qp.flushSQ()
	qp.flushRQ()
	if f := qp.init.OnRecvLow; f != nil {
		f() // receives posted from now on need the engine to flush them
	}
	if qp.srq != nil {
		// IBA 11.6.3.1: no more WQEs will be taken from the SRQ.
		qp.dev.raise(AsyncEvent{Type: EventQPLastWQEReached, QP: qp})
	}
}

func (qp *QP) stopTimers() {
	r := &qp.req
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if r.rnrTimer != nil {
		r.rnrTimer.Stop()
		r.rnrTimer = nil
	}
	r.deadline, r.probeAt = zeroTime, zeroTime
	qp.stopPace()
}

// flushSQ completes every send WQE not yet completed with WRFlushErr
// (error completions are generated whether or not the WR was signaled).
func (qp *QP) flushSQ() {
	r := &qp.req
	prod := qp.sqProd.Load()
	for r.compIdx != prod {
		w := qp.sqSlot(r.compIdx)
		qp.completeSend(w, WCWRFlushErr)
	}
	r.startIdx, r.reqIdx = r.compIdx, r.compIdx
	r.outReads = 0
	r.stalled = false
}

// flushRQ completes every posted receive with WRFlushErr; with an SRQ
// only the WR the QP holds (the SRQ's WRs stay for the other QPs).
func (qp *QP) flushRQ() {
	if qp.rsrq() != nil || qp.isXRC() {
		if qp.srqHeld {
			qp.srqHeld = false
			wc := WC{WRID: qp.srqWQE.wrID, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
			qp.rcq().push(&wc, false)
		}
		return
	}
	prod := qp.rqProd.Load()
	for c := qp.rqCons.Load(); c != prod; c++ {
		w := qp.rq.at(c)
		wc := WC{WRID: w.wrID, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
		qp.rqCons.Store(c + 1) // free the slot before the completion is visible
		qp.recvCQ.push(&wc, false)
	}
}

// reset returns the QP to its freshly created condition (Modify to RESET):
// work queues are emptied without completions.
func (qp *QP) reset() {
	qp.stopTimers()
	qp.dropBacklog()
	qp.sqCons.Store(qp.sqProd.Load())
	qp.rqCons.Store(qp.rqProd.Load())
	c := qp.sqCons.Load()
	qp.req = reqState{compIdx: c, startIdx: c, reqIdx: c}
	qp.resp = respState{}
	qp.srqHeld = false
	qp.xsrq = nil
	qp.dc = dcqcnState{}
	clear(qp.readRes)
	cap := qp.attr.Cap
	qp.attr = QPAttr{PortNum: 1, PathMTU: qp.dev.activeMTU, Cap: cap}
	qp.path = txPath{}
}

// recvAvailable reports whether a receive WR is there for a new message
// (engine).
func (qp *QP) recvAvailable() bool {
	if s := qp.rsrq(); s != nil {
		return qp.srqHeld || !s.empty() || (s.refill() && !s.empty())
	}
	if qp.isXRC() {
		return false
	}
	return qp.rqCons.Load() != qp.rqProd.Load() || (qp.recvRefill() && qp.rqCons.Load() != qp.rqProd.Load())
}

// recvRefill asks the QP's OnRecvEmpty for receives (engine).
func (qp *QP) recvRefill() bool {
	f := qp.init.OnRecvEmpty
	return f != nil && f()
}

// recvHeld reports whether the QP holds a receive WR it is filling or is
// about to fill: the RQ's head, or the WR taken from the SRQ (engine).
func (qp *QP) recvHeld() bool {
	if qp.rsrq() != nil || qp.isXRC() {
		return qp.srqHeld
	}
	return qp.rqCons.Load() != qp.rqProd.Load()
}

// recvTake returns the receive WR for the current message, taking it from
// the SRQ if needed, or nil when there is none (engine).
func (qp *QP) recvTake() *recvWQE {
	if s := qp.rsrq(); s != nil {
		if !qp.srqHeld {
			if !s.take(&qp.srqWQE) && !(s.refill() && s.take(&qp.srqWQE)) {
				return nil
			}
			qp.srqHeld = true
		}
		return &qp.srqWQE
	}
	c := qp.rqCons.Load()
	if c == qp.rqProd.Load() && !(qp.recvRefill() && c != qp.rqProd.Load()) {
		return nil
	}
	return qp.rq.at(c)
}

// recvDone retires the WR recvTake returned; its completion is pushed
// after (engine).
func (qp *QP) recvDone() {
	if qp.rsrq() != nil {
		qp.srqHeld = false
		return
	}
	c := qp.rqCons.Add(1) // free the slot before the completion is visible
	if f := qp.init.OnRecvLow; f != nil && qp.rqProd.Load()-c < uint32(qp.init.RecvLow) {
		f()
	}
}

// recvPD is the protection domain of the receive WRs' lkeys.
func (qp *QP) recvPD() *PD {
	if s := qp.rsrq(); s != nil {
		return s.pd
	}
	return qp.pd
}

func (qp *QP) sqSlot(i uint32) *sendWQE { return qp.sq.at(i) }
