package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Tag matching (TM SRQs, IBV_SRQT_TM; the model of ConnectX-5 and of
// libibverbs' ibv_post_srq_ops). A TM SRQ holds, besides its ordinary
// receive WRs, a list of tagged buffers that software adds and removes
// with operations (TMOp). Every message an RC QP on the SRQ receives
// starts with a 16-byte tag-matching header (struct ibv_tmh, big endian:
// opcode, 3 reserved bytes, app_ctx, tag):
//
//	 0               1               2               3
//	+---------------+---------------+---------------+---------------+
//	|    opcode     |                 reserved                      |
//	+---------------+---------------+---------------+---------------+
//	|                           app_ctx                             |
//	+---------------+---------------+---------------+---------------+
//	|                          tag (64 bits)                        |
//	+                                                               +
//	|                                                               |
//	+---------------+---------------+---------------+---------------+
//
// A rendezvous message (TMHRndv) follows it with a 16-byte struct
// ibv_rvh: the sender's buffer va (64), rkey (32) and len (32).
//
//   - EAGER: matched against the tagged buffers in posting order
//     ((tag ^ entry.tag) & entry.mask == 0); a match receives the data
//     after the TMH and completes TM_RECV with MATCH|DATA_VALID, the
//     entry's receive wr_id and the tag. No match: the whole message
//     goes to an ordinary WR (TM_RECV, no flags) and the device's
//     unexpected count grows.
//   - NO_TAG: an ordinary WR, completion TM_NO_TAG.
//   - RNDV: a match completes TM_RECV with MATCH; then the device READs
//     the sender's buffer into the tagged buffer on the same QP,
//     completes TM_RECV with DATA_VALID and sends the sender a SEND
//     carrying a TMH with opcode FIN (what ConnectX does; the sender's
//     receive WR completes as an ordinary receive). No match: as EAGER.
//   - FIN: an ordinary WR, completed as a plain RECV.
//
// Unexpected messages and new tags are kept consistent as in the
// hardware: a tag added with an unexpected_cnt other than the device's
// count is not matched (its TM_ADD completion has SYNC_REQ) until an
// operation with IBV_OPS_TM_SYNC reports the device's count.

// Tag-matching limits, reported as DeviceAttr's TM caps.
const (
	TMMaxNumTags   = 64 // tagged buffers per SRQ (ibv_tm_caps.max_num_tags; a 64-bit set of handles)
	TMMaxOps       = 32 // operations in flight (ibv_tm_caps.max_ops)
	TMMaxRndvHdr   = 64 // rendezvous message (TMH, RVH, user header) (max_rndv_hdr_size)
	TMMaxSGE       = 1  // SGEs of a tagged buffer (max_sge)
	TMHeaderLen    = 16 // struct ibv_tmh
	TMRndvHeadLen  = 16 // struct ibv_rvh
	tmRndvPerQP    = 4  // rendezvous READs one QP has in flight
	tmRndvSendWQEs = 2 * tmRndvPerQP
)

// TM capability flags (enum ibv_tm_cap_flags).
const TMCapRC = 1 << 0 // IBV_TM_CAP_RC

// TMH opcodes (enum ibv_tmh_op).
const (
	TMHNoTag = 0 // IBV_TMH_NO_TAG
	TMHRndv  = 1 // IBV_TMH_RNDV
	TMHFin   = 2 // IBV_TMH_FIN
	TMHEager = 3 // IBV_TMH_EAGER
)

// Tag-matching completion opcodes and flags (enum ibv_wc_opcode,
// enum ibv_wc_flags). An opcode's line comment is the text String
// returns, libibverbs' name without IBV_WC_.
const (
	WCTMAdd   WCOpcode = 130 // TM_ADD
	WCTMDel   WCOpcode = 131 // TM_DEL
	WCTMSync  WCOpcode = 132 // TM_SYNC
	WCTMRecv  WCOpcode = 133 // TM_RECV
	WCTMNoTag WCOpcode = 134 // TM_NO_TAG

	WCTMSyncReq   WCFlags = 1 << 4 // IBV_WC_TM_SYNC_REQ
	WCTMMatch     WCFlags = 1 << 5 // IBV_WC_TM_MATCH
	WCTMDataValid WCFlags = 1 << 6 // IBV_WC_TM_DATA_VALID
)

// TMOpcode is a tag-list operation (enum ibv_ops_wr_opcode).
type TMOpcode uint32

// Tag-list operations.
const (
	TMTagAdd  TMOpcode = 0 // IBV_WR_TAG_ADD
	TMTagDel  TMOpcode = 1 // IBV_WR_TAG_DEL
	TMTagSync TMOpcode = 2 // IBV_WR_TAG_SYNC
)

// TMOpFlags are enum ibv_ops_flags.
type TMOpFlags uint32

// Operation flags.
const (
	TMOpSignaled TMOpFlags = 1 << 0 // IBV_OPS_SIGNALED
	TMOpSync     TMOpFlags = 1 << 1 // IBV_OPS_TM_SYNC
)

// TMOp is a tag-list operation (struct ibv_ops_wr). Handle names the
// tagged buffer: the poster chooses it for an ADD (below TMMaxNumTags
// and the SRQ's MaxNumTags, not in use) and names it again in a DEL.
type TMOp struct {
	WRID          uint64
	Opcode        TMOpcode
	Flags         TMOpFlags
	UnexpectedCnt uint32
	Handle        uint32
	// ADD only.
	RecvWRID uint64
	SGList   []SGE
	Tag      uint64
	Mask     uint64
}

// TMAttr makes an SRQ a tag-matching SRQ (ibv_srq_init_attr_ex's
// tm_cap).
type TMAttr struct {
	MaxNumTags int // 1..TMMaxNumTags
	MaxOps     int // 1..TMMaxOps
}

// TMH is a view of a tag-matching header (struct ibv_tmh).
type TMH []byte

// Opcode, AppCtx and Tag are the header's fields.
func (h TMH) Opcode() uint8    { return h[0] }
func (h TMH) AppCtx() uint32   { return binary.BigEndian.Uint32(h[4:8]) }
func (h TMH) Tag() uint64      { return binary.BigEndian.Uint64(h[8:16]) }
func (h TMH) Reserved() []byte { return h[1:4] }

// RVH is a view of a rendezvous header (struct ibv_rvh).
type RVH []byte

// VA, RKey and Len are the header's fields.
func (h RVH) VA() uint64   { return binary.BigEndian.Uint64(h[0:8]) }
func (h RVH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:12]) }
func (h RVH) Len() uint32  { return binary.BigEndian.Uint32(h[12:16]) }

// TMHFields are the fields of a TMH to encode.
type TMHFields struct {
	Opcode uint8
	AppCtx uint32
	Tag    uint64
}

// Encode writes f into h (TMHeaderLen bytes), reserved bytes zero.
func (h TMH) Encode(f *TMHFields) {
	h[0] = f.Opcode
	h[1], h[2], h[3] = 0, 0, 0
	binary.BigEndian.PutUint32(h[4:8], f.AppCtx)
	binary.BigEndian.PutUint64(h[8:16], f.Tag)
}

// RVHFields are the fields of an RVH to encode.
type RVHFields struct {
	VA   uint64
	RKey uint32
	Len  uint32
}

// Encode writes f into h (TMRndvHeadLen bytes).
func (h RVH) Encode(f *RVHFields) {
	binary.BigEndian.PutUint64(h[0:8], f.VA)
	binary.BigEndian.PutUint32(h[8:12], f.RKey)
	binary.BigEndian.PutUint32(h[12:16], f.Len)
}

// Parse errors of a tag-matching message.
var (
	ErrTMShort  = errors.New("rdma: message shorter than its tag-matching headers")
	ErrTMOpcode = errors.New("rdma: unknown TMH opcode")
)

// ParseTM checks the headers at the start of a tag-matching message's
// first packet: the TMH, and for TMHRndv the RVH after it. rvh is nil
// for other opcodes.
func ParseTM(b []byte) (tmh TMH, rvh RVH, err error) {
	if len(b) < TMHeaderLen {
		return nil, nil, ErrTMShort
	}
	tmh = TMH(b[:TMHeaderLen])
	// The reserved bytes are not checked: ConnectX ignores them, and
	// rdma-core's tests/test_tag_matching.py sends them non-zero.
	switch tmh.Opcode() {
	case TMHNoTag, TMHEager, TMHFin:
	case TMHRndv:
		if len(b) < TMHeaderLen+TMRndvHeadLen {
			return nil, nil, ErrTMShort
		}
		rvh = RVH(b[TMHeaderLen : TMHeaderLen+TMRndvHeadLen])
	default:
		return nil, nil, ErrTMOpcode
	}
	return tmh, rvh, nil
}

// tmTag is one tagged buffer of a TM SRQ.
type tmTag struct {
	inUse bool // the handle is taken (added, not consumed or deleted)
	valid bool // matched against arriving messages
	tag   uint64
	mask  uint64
	wrID  uint64 // the ADD's recv_wr_id
	sge   []SGE
	len   uint64
}

// tmState is the tag-matching half of a TM SRQ, guarded by SRQ.mu.
type tmState struct {
	maxTags int
	maxOps  int
	tags    []tmTag  // by handle
	order   []uint32 // handles in use, in posting order
	unexp   uint32   // messages the device found unexpected
	notify  func(busy uint64)
}

// busy is the set of handles in use, bit h for handle h (maxTags <= 64).
func (t *tmState) busy() uint64 {
	var m uint64
	for _, h := range t.order {
		m |= 1 << h
	}
	return m
}

// changed tells the notify hook the handles in use (s.mu held).
func (t *tmState) changed() {
	if t.notify != nil {
		t.notify(t.busy())
	}
}

// SetTMNotify makes the SRQ call fn with the set of tag handles in use
// (bit h for handle h) whenever it changes: after an ADD or DEL and when
// a message consumes a tag, before that operation's or message's
// completion. fn runs with the SRQ's lock held, on the goroutine that
// changed the list (PostOps' caller, or the engine); it must not call
// into the SRQ. A device backend keeps the guest's view with it.
func (s *SRQ) SetTMNotify(fn func(busy uint64)) {
	if s.tm == nil {
		return
	}
	s.mu.Lock()
	s.tm.notify = fn
	s.mu.Unlock()
}

// IsTM reports whether s is a tag-matching SRQ.
func (s *SRQ) IsTM() bool { return s.tm != nil }

// PostOps executes tag-list operations (ibv_post_srq_ops) in order. An
// operation that cannot be executed (a handle out of range, in use for
// an ADD or not in use for a DEL, a list full, too many SGEs, an SGE
// that is not a live MR of the SRQ's PD with local write) completes with
// WCTMErr (or WCLocProtErr for the SGE) on the SRQ's CQ whether or not
// it was signaled; the others complete when signaled. It returns an
// error without executing anything only for an SRQ that is not a TM SRQ
// or is destroyed, or an unknown opcode (a *PostError naming it).
func (s *SRQ) PostOps(ops []TMOp) error {
	if s.dev.closed.Load() {
		return &PostError{Index: 0, Err: ErrClosed}
	}
	if s.tm == nil {
		return &PostError{Index: 0, Err: fmt.Errorf("post ops to SRQ %d: not a tag-matching SRQ: %w", s.handle, ErrInvalid)}
	}
	if s.dead.Load() {
		return &PostError{Index: 0, Err: fmt.Errorf("post ops to SRQ %d: destroyed: %w", s.handle, ErrInvalid)}
	}
	for i := range ops {
		if ops[i].Opcode > TMTagSync {
			return &PostError{Index: i, Err: fmt.Errorf("post ops to SRQ %d: opcode %d: %w", s.handle, ops[i].Opcode, ErrInvalid)}
		}
		s.mu.Lock()
		wc := s.execOp(&ops[i])
		s.mu.Unlock()
		if wc.Status != WCSuccess || ops[i].Flags&TMOpSignaled != 0 {
			s.cq.push(&wc, false)
		}
	}
	return nil
}

// execOp executes op (s.mu held) and returns its completion.
func (s *SRQ) execOp(op *TMOp) WC {
	t := s.tm
	wc := WC{WRID: op.WRID, Opcode: WCTMAdd + WCOpcode(op.Opcode), TMHandle: op.Handle}
	fail := func(st WCStatus) WC { wc.Status = st; return wc }
	switch op.Opcode {
	case TMTagAdd:
		switch {
		case op.Handle >= uint32(t.maxTags):
			return fail(WCTMErr)
		case t.tags[op.Handle].inUse:
			return fail(WCTMErr)
		case len(op.SGList) > TMMaxSGE:
			return fail(WCTMErr)
		}
		var n uint64
		for _, g := range op.SGList {
			if g.Length == 0 {
				continue
			}
			if s.dev.localMR(g.LKey, g.Addr, uint64(g.Length), s.pd, AccessLocalWrite) == nil {
				return fail(WCLocProtErr)
			}
			n += uint64(g.Length)
		}
		e := &t.tags[op.Handle]
		*e = tmTag{inUse: true, tag: op.Tag, mask: op.Mask, wrID: op.RecvWRID,
			sge: append(e.sge[:0], op.SGList...), len: n}
		// A tag software added before it saw every unexpected message
		// might match one of those: it waits for a sync.
		e.valid = op.UnexpectedCnt == t.unexp
		if !e.valid {
			wc.WCFlags |= WCTMSyncReq
		}
		t.order = append(t.order, op.Handle)
		t.changed()
	case TMTagDel:
		if op.Handle >= uint32(t.maxTags) || !t.tags[op.Handle].inUse {
			return fail(WCTMErr)
		}
		t.remove(op.Handle)
		t.changed()
	}
	if op.Flags&TMOpSync != 0 || op.Opcode == TMTagSync {
		if op.UnexpectedCnt == t.unexp {
			for _, h := range t.order {
				t.tags[h].valid = true
			}
		} else {
			wc.WCFlags |= WCTMSyncReq
		}
	}
	return wc
}

// remove takes handle h off the list.
func (t *tmState) remove(h uint32) {
	t.tags[h].inUse, t.tags[h].valid = false, false
	for i, o := range t.order {
		if o == h {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// match takes the first valid tagged buffer, in posting order, that tag
// matches, into dst (s.mu held). It reports the handle.
func (t *tmState) match(tag uint64, dst *recvWQE) (uint32, bool) {
	for _, h := range t.order {
		e := &t.tags[h]
		if !e.valid || (tag^e.tag)&e.mask != 0 {
			continue
		}
		dst.wrID, dst.length = e.wrID, e.len
		dst.sge = dst.sgeBuf[:len(e.sge)]
		copy(dst.sge, e.sge)
		t.remove(h)
		t.changed()
		return h, true
	}
	return 0, false
}

// tmRecv is what the responder knows of the tag-matching message it
// is receiving (respState.tm).
type tmRecv struct {
	mode uint8 // tmPlain, tmEager, tmRndv
	wc   WC    // the completion's opcode, flags, tag, app_ctx
	rvh  RVHFields
	tag  uint64
}

// Responder modes of a message on a TM SRQ.
const (
	tmPlain = iota // into an ordinary WR, whole message
	tmEager        // into a tagged buffer, the data after the TMH
	tmRndv         // matched rendezvous: the payload is not placed
)

// tmTake picks the receive WR for a message on a TM SRQ from its first
// packet's payload (engine). ok false with err nil: no WR (RNR). err:
// the message is malformed.
func (qp *QP) tmTake(s *SRQ, payload []byte) (w *recvWQE, ok bool, err error) {
	tmh, rvh, err := ParseTM(payload)
	if err != nil {
		return nil, false, err
	}
	rs := &qp.resp
	m := tmRecv{wc: WC{Opcode: WCTMRecv}}
	dst := &qp.srqWQE
	if qp.srqHeld {
		return dst, true, nil
	}
	if tmh.Opcode() == TMHRndv && !qp.tmRndvRoom() {
		return nil, false, nil // the READ cannot start yet: not ready
	}
	s.mu.Lock()
	t := s.tm
	matched, handle := false, uint32(0)
	if op := tmh.Opcode(); op == TMHEager || op == TMHRndv {
		handle, matched = t.match(tmh.Tag(), dst)
	}
	s.mu.Unlock()
	switch {
	case matched && tmh.Opcode() == TMHEager:
		m.mode = tmEager
		m.wc.WCFlags = WCTMMatch | WCTMDataValid
	case matched:
		m.mode = tmRndv
		m.wc.WCFlags = WCTMMatch
		m.rvh = RVHFields{VA: rvh.VA(), RKey: rvh.RKey(), Len: rvh.Len()}
	default:
		if !s.take(dst) {
			return nil, false, nil
		}
		switch tmh.Opcode() {
		case TMHNoTag:
			m.wc.Opcode = WCTMNoTag
		case TMHFin:
			m.wc.Opcode = WCRecv
		default:
			s.mu.Lock()
			t.unexp++
			s.mu.Unlock()
		}
	}
	if matched {
		m.wc.Tag, m.wc.TMAppCtx, m.wc.TMHandle = tmh.Tag(), tmh.AppCtx(), handle
	}
	m.tag = tmh.Tag()
	rs.tm = m
	qp.srqHeld = true
	return dst, true, nil
}

// tmRndvRoom reports whether the QP's send queue has room for the
// READ and the FIN of one more rendezvous (engine).
func (qp *QP) tmRndvRoom() bool {
	used := qp.sqProd.Load() - qp.sqCons.Load()
	return int(used)+2 <= qp.init.Cap.MaxSendWR+tmRndvSendWQEs
}

// tmStartRndv queues the rendezvous READ of the tagged buffer w and the
// FIN that follows it, fenced, on the QP's send queue (engine). The
// READ's completion is the TM_RECV with DATA_VALID (tmComplete). A
// sender's buffer longer than the tagged buffer is not read: that
// TM_RECV completes with WCLocLenErr at once, and the FIN still goes.
func (qp *QP) tmStartRndv(w *recvWQE, m *tmRecv) {
	qp.sqMu.Lock()
	prod := qp.sqProd.Load()
	if uint64(m.rvh.Len) > w.length {
		wc := WC{WRID: w.wrID, Status: WCLocLenErr, Opcode: WCTMRecv, QPNum: qp.qpn,
			SrcQP: qp.attr.DestQPNum}
		qp.rcq().push(&wc, false)
	} else {
		rd := qp.sq.slot(prod)
		*rd = sendWQE{sgeBuf: rd.sgeBuf, inlineBuf: rd.inlineBuf, mrs: rd.mrs}
		rd.tm, rd.wrID = tmSendRead, w.wrID
		rd.opcode, rd.remoteAddr, rd.rkey, rd.length = WRRDMARead, m.rvh.VA, m.rvh.RKey, m.rvh.Len
		rd.sgeBuf = sgeSlots(rd.sgeBuf, len(w.sge))
		rd.sge = rd.sgeBuf[:len(w.sge)]
		copy(rd.sge, w.sge)
		prod++
	}
	fin := qp.sq.slot(prod)
	*fin = sendWQE{sgeBuf: fin.sgeBuf, inlineBuf: fin.inlineBuf, mrs: fin.mrs}
	fin.tm, fin.opcode, fin.flags = tmSendFin, WRSend, SendFence|SendInline
	if cap(fin.inlineBuf) < TMHeaderLen {
		fin.inlineBuf = make([]byte, TMHeaderLen)
	}
	fin.inline, fin.isInline, fin.length = fin.inlineBuf[:TMHeaderLen], true, TMHeaderLen
	fin.sge = fin.sgeBuf[:0]
	TMH(fin.inline).Encode(&TMHFields{Opcode: TMHFin, Tag: m.tag})
	qp.sqProd.Store(prod + 1)
	qp.sqMu.Unlock()
	qp.dev.eng.signal(qp, evSQ)
}

// Device-made send WQEs (sendWQE.tm).
const (
	tmSendNone = iota
	tmSendRead // rendezvous READ into a tagged buffer
	tmSendFin  // the FIN to the rendezvous sender
)

// tmComplete completes a device-made WQE instead of the send queue's
// completion: a rendezvous READ's TM_RECV with DATA_VALID (or its
// error) goes to the receive CQ; a FIN completes silently (engine).
func (qp *QP) tmComplete(w *sendWQE, status WCStatus) {
	if w.tm == tmSendFin {
		return
	}
	// No tag: ConnectX reports it with the MATCH completion only, and
	// rdma-core's test_tm_rndv expects 0 here.
	wc := WC{WRID: w.wrID, Status: status, Opcode: WCTMRecv, ByteLen: w.length, QPNum: qp.qpn,
		SrcQP: qp.attr.DestQPNum}
	if status == WCSuccess {
		wc.WCFlags = WCTMDataValid
	}
	qp.rcq().push(&wc, false)
}
