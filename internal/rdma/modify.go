package rdma

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// transition is one entry of the RC QP state-transition table: whether the
// transition is legal and which attributes it requires and allows. It is
// the RC column of the Linux kernel's qp_state_table
// (drivers/infiniband/core/verbs.c, ib_modify_qp_is_ok), which encodes
// the QP state machine of IBA Vol 1 10.3; the guest kernel checks the same
// table before a modify reaches the device.
type transition struct {
	valid    bool
	req, opt QPAttrMask
}

// transitions is a state-transition table, [current][next].
type transitions [QPStateErr + 1][QPStateErr + 1]transition

// baseTransitions is what every QP type's table has: any state may go to
// RESET and, but RESET, to ERR (no RESET->ERR in the kernel table).
func baseTransitions() (t transitions) {
	ok := transition{valid: true}
	for s := QPStateReset; s <= QPStateErr; s++ {
		if s != QPStateReset {
			t[s][QPStateErr] = ok
		}
		t[s][QPStateReset] = ok
	}
	return t
}

var rcTransitions = func() (t transitions) {
	t = baseTransitions()
	ok := transition{valid: true}
	t[QPStateReset][QPStateInit] = transition{valid: true,
		req: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags}
	t[QPStateInit][QPStateInit] = transition{valid: true,
		opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags}
	t[QPStateInit][QPStateRTR] = transition{valid: true,
		req: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer,
		opt: QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex}
	t[QPStateRTR][QPStateRTS] = transition{valid: true,
		req: QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRDAtomic,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrPathMigState}
	t[QPStateRTS][QPStateRTS] = transition{valid: true,
		opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer}
	t[QPStateRTS][QPStateSQD] = transition{valid: true, opt: QPAttrEnSQDAsyncNotify}
	t[QPStateSQD][QPStateRTS] = transition{valid: true,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrPathMigState}
	t[QPStateSQD][QPStateSQD] = transition{valid: true,
		opt: QPAttrPort | QPAttrAV | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic |
			QPAttrMaxDestRDAtomic | QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrMinRNRTimer |
			QPAttrPathMigState}
	t[QPStateSQE][QPStateRTS] = ok // RC: no optional attributes
	return t
}()

// xrcIniTransitions and xrcTgtTransitions are RC's with the required
// attributes of ib_modify_qp_is_ok for IB_QPT_XRC_INI and IB_QPT_XRC_TGT:
// an initiator has no responder (INIT->RTR needs no MaxDestRDAtomic or
// MinRNRTimer), a target no requester (RTR->RTS needs only Timeout and
// SQPSN).
var xrcIniTransitions = func() (t transitions) {
	t = rcTransitions
	r := &t[QPStateInit][QPStateRTR]
	r.req &^= QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer
	r.opt |= QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer
	return t
}()

var xrcTgtTransitions = func() (t transitions) {
	t = rcTransitions
	r := &t[QPStateRTR][QPStateRTS]
	r.req = QPAttrTimeout | QPAttrSQPSN
	r.opt |= QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic
	return t
}()

// Modify changes the QP's state and attributes (ibv_modify_qp), following
// the IBTA state machine RESET -> INIT -> RTR -> RTS <-> SQD, any -> ERR,
// any -> RESET, with the required and optional attributes of
// ib_modify_qp_is_ok for the QP's type (RC or UD). The error names the transition and the
// missing, forbidden or invalid attribute; nothing changes on error.
//
// Entering ERR completes all outstanding work with WRFlushErr; entering
// RESET discards it without completions. SQD stops starting new send WRs;
// those already started complete (QPAttr.SQDraining reports the drain).
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if attr == nil {
		return fmt.Errorf("rdma: modify QP %#x: nil attributes: %w", qp.qpn, ErrInvalid)
	}
	var err error
	if e := qp.dev.eng.do(func() { err = qp.modify(attr, mask) }); e != nil {
		return fmt.Errorf("rdma: modify QP %#x: %w", qp.qpn, e)
	}
	return err
}

// modify runs on the engine goroutine.
func (qp *QP) modify(a *QPAttr, mask QPAttrMask) error {
	d := qp.dev
	if qp.destroyed {
		return fmt.Errorf("rdma: modify QP %#x: destroyed: %w", qp.qpn, ErrInvalid)
	}
	cur := qp.State()
	next := cur
	if mask&QPAttrState != 0 {
		next = a.QPState
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("rdma: modify QP %#x %v->%v: %s: %w", qp.qpn, cur, next, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if mask&^(QPAttrMask(1<<21)-1) != 0 {
		return fail("unknown attribute mask bits %#x", uint32(mask&^(QPAttrMask(1<<21)-1)))
	}
	if next > QPStateErr {
		return fail("no such state %d", uint32(next))
	}
	if mask&QPAttrCurState != 0 {
		if cur != QPStateRTR && cur != QPStateRTS && cur != QPStateSQD && cur != QPStateSQE {
			return fail("CurState may only be given in RTR, RTS, SQD or SQE")
		}
		if a.CurQPState != cur {
			return fail("CurQPState %v is not the QP's state %v", a.CurQPState, cur)
		}
	}
	tr := qp.svc().transitions[cur][next]
	if !tr.valid {
		return fail("illegal state transition")
	}
	if missing := tr.req &^ mask; missing != 0 {
		return fail("missing required attribute(s) %v", missing)
	}
	if extra := mask &^ (tr.req | tr.opt | QPAttrState); extra != 0 {
		return fail("attribute(s) %v not allowed in this transition", extra)
	}
	if cur == QPStateSQD && mask&QPAttrState != 0 && next != QPStateErr && next != QPStateReset &&
		qp.req.compIdx != qp.req.startIdx {
		return fail("send queue still draining")
	}

	// Check values before changing anything.
	if mask&QPAttrPKeyIndex != 0 && a.PKeyIndex != 0 {
		return fail("PKeyIndex %d outside the 1-entry P_Key table", a.PKeyIndex)
	}
	if mask&QPAttrPort != 0 && a.PortNum != 1 {
		return fail("port %d does not exist (the device has port 1)", a.PortNum)
	}
	if mask&QPAttrAccessFlags != 0 && a.QPAccessFlags&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0 {
		return fail("QPAccessFlags %v: only LocalWrite and Remote* apply to a QP", a.QPAccessFlags)
	}
	if mask&QPAttrPathMTU != 0 {
		if a.PathMTU < MTU256 || a.PathMTU > MTU4096 {
			return fail("PathMTU %d is not an IB MTU code 1-5", uint32(a.PathMTU))
		}
		if a.PathMTU > d.activeMTU {
			return fail("PathMTU %v exceeds the port's active MTU %v", a.PathMTU, d.activeMTU)
		}
	}
	if mask&QPAttrAltPath != 0 {
		return fmt.Errorf("rdma: modify QP %#x %v->%v: alternate paths (APM) are not supported on RoCE: %w", qp.qpn, cur, next, ErrUnsupported)
	}
	if mask&QPAttrDestQPN != 0 && a.DestQPNum > proto.QPNMask {
		return fail("DestQPNum %#x exceeds 24 bits", a.DestQPNum)
	}
	if mask&QPAttrTimeout != 0 && a.Timeout > 31 {
		return fail("Timeout %d exceeds 31", a.Timeout)
	}
	if mask&QPAttrRetryCnt != 0 && a.RetryCnt > 7 {
		return fail("RetryCnt %d exceeds 7", a.RetryCnt)
	}
	if mask&QPAttrRNRRetry != 0 && a.RNRRetry > 7 {
		return fail("RNRRetry %d exceeds 7", a.RNRRetry)
	}
	if mask&QPAttrMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return fail("MinRNRTimer %d exceeds 31", a.MinRNRTimer)
	}
	if mask&QPAttrMaxQPRDAtomic != 0 && int(a.MaxRDAtomic) > d.cfg.MaxQPRDAtomic {
		return fail("MaxRDAtomic %d exceeds the device's %d", a.MaxRDAtomic, d.cfg.MaxQPRDAtomic)
	}
	if mask&QPAttrMaxDestRDAtomic != 0 && int(a.MaxDestRDAtomic) > d.cfg.MaxQPRDAtomic {
		return fail("MaxDestRDAtomic %d exceeds the device's %d", a.MaxDestRDAtomic, d.cfg.MaxQPRDAtomic)
	}
	var path txPath
	if mask&QPAttrAV != 0 {
		dest := qp.attr.DestQPNum
		if mask&QPAttrDestQPN != 0 {
			dest = a.DestQPNum
		}
		var err error
		if path, err = d.buildPath(qp.qpn, dest, &a.AHAttr); err != nil {
			return fmt.Errorf("rdma: modify QP %#x %v->%v: %w", qp.qpn, cur, next, err)
		}
	}

	// Apply.
	at := &qp.attr
	if mask&QPAttrPKeyIndex != 0 {
		at.PKeyIndex = a.PKeyIndex
	}
	if mask&QPAttrAccessFlags != 0 {
		at.QPAccessFlags = a.QPAccessFlags
	}
	if mask&QPAttrQKey != 0 {
		at.QKey = a.QKey
	}
	if mask&QPAttrPathMTU != 0 {
		at.PathMTU = a.PathMTU
	}
	if mask&QPAttrDestQPN != 0 {
		at.DestQPNum = a.DestQPNum
		qp.path.f.BTH.DestQP = a.DestQPNum
	}
	if mask&QPAttrAV != 0 {
		at.AHAttr = a.AHAttr
		at.AHAttr.PortNum = 1
		qp.path = path
	}
	if mask&QPAttrRQPSN != 0 {
		at.RQPSN = a.RQPSN & proto.PSNMask
	}
	if mask&QPAttrSQPSN != 0 {
		at.SQPSN = a.SQPSN & proto.PSNMask
	}
	if mask&QPAttrMaxDestRDAtomic != 0 {
		at.MaxDestRDAtomic = a.MaxDestRDAtomic
	}
	if mask&QPAttrMaxQPRDAtomic != 0 {
		at.MaxRDAtomic = a.MaxRDAtomic
	}
	if mask&QPAttrMinRNRTimer != 0 {
		at.MinRNRTimer = a.MinRNRTimer
	}
	if mask&QPAttrTimeout != 0 {
		at.Timeout = a.Timeout
	}
	if mask&QPAttrRetryCnt != 0 {
		at.RetryCnt = a.RetryCnt
	}
	if mask&QPAttrRNRRetry != 0 {
		at.RNRRetry = a.RNRRetry
	}
	if mask&QPAttrPathMigState != 0 {
		at.PathMigState = a.PathMigState
	}
	if mask&QPAttrEnSQDAsyncNotify != 0 {
		at.EnSQDAsyncNotify = a.EnSQDAsyncNotify
	}
	qp.pmtu = at.PathMTU.Bytes()
	defer qp.snapshot()

	if mask&QPAttrState == 0 {
		return nil
	}
	switch next {
	case QPStateReset:
		qp.reset()
		qp.setState(QPStateReset)
	case QPStateInit:
		qp.setState(QPStateInit)
	case QPStateRTR:
		if cur == QPStateInit {
			qp.resp = respState{ePSN: proto.PSN(at.RQPSN)}
			clear(qp.readRes)
		}
		qp.setState(QPStateRTR)
	case QPStateRTS:
		r := &qp.req
		if cur == QPStateRTR {
			psn := proto.PSN(at.SQPSN)
			*r = reqState{sqPSN: psn, una: psn, compIdx: r.compIdx, startIdx: r.compIdx, reqIdx: r.compIdx}
		}
		r.retryLeft, r.rnrLeft = at.RetryCnt, at.RNRRetry
		qp.setState(QPStateRTS)
		d.eng.schedule(qp)
	case QPStateSQD:
		qp.setState(QPStateSQD)
	case QPStateErr:
		qp.enterError()
	}
	return nil
}
