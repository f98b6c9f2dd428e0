package rdma_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// Masks of the attributes each RC transition needs (ib_modify_qp_is_ok).
const (
	mInit = rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags
	mRTR  = rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
		rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer
	mRTS = rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
		rdma.QPAttrMaxQPRDAtomic
)

// modifyFixture makes a fresh QP on a device and can drive it to a state.
type modifyFixture struct {
	t    *testing.T
	p    *pair
	qp   *rdma.QP
	good map[rdma.QPState]rdma.QPAttr
}

func newModifyFixture(t *testing.T) *modifyFixture {
	p := newPair(t, pairOpts{})
	f := &modifyFixture{t: t, p: p}
	f.qp = p.a.createQP(t, &p.o)
	gid, _ := p.b.dev.QueryGID(1)
	f.good = map[rdma.QPState]rdma.QPAttr{
		rdma.QPStateInit: {QPState: rdma.QPStateInit, PortNum: 1, QPAccessFlags: rdma.AccessRemoteWrite},
		rdma.QPStateRTR: {QPState: rdma.QPStateRTR, PathMTU: rdma.MTU1024, DestQPNum: p.qb.QPN(), RQPSN: 5,
			MaxDestRDAtomic: 1, MinRNRTimer: 12, AHAttr: rdma.AHAttr{IsGlobal: true, DMAC: p.b.mac,
				GRH: rdma.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 1}}},
		rdma.QPStateRTS: {QPState: rdma.QPStateRTS, SQPSN: 7, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
		rdma.QPStateSQD: {QPState: rdma.QPStateSQD},
		rdma.QPStateErr: {QPState: rdma.QPStateErr},
	}
	return f
}

// to drives the fixture's QP from RESET to s along the normal path.
func (f *modifyFixture) to(s rdma.QPState) {
	f.t.Helper()
	path := map[rdma.QPState][]rdma.QPState{
		rdma.QPStateReset: {},
		rdma.QPStateInit:  {rdma.QPStateInit},
		rdma.QPStateRTR:   {rdma.QPStateInit, rdma.QPStateRTR},
		rdma.QPStateRTS:   {rdma.QPStateInit, rdma.QPStateRTR, rdma.QPStateRTS},
		rdma.QPStateSQD:   {rdma.QPStateInit, rdma.QPStateRTR, rdma.QPStateRTS, rdma.QPStateSQD},
		rdma.QPStateErr:   {rdma.QPStateInit, rdma.QPStateErr},
	}[s]
	masks := map[rdma.QPState]rdma.QPAttrMask{rdma.QPStateInit: mInit, rdma.QPStateRTR: mRTR,
		rdma.QPStateRTS: mRTS, rdma.QPStateSQD: rdma.QPAttrState, rdma.QPStateErr: rdma.QPAttrState}
	for _, st := range path {
		a := f.good[st]
		if err := f.qp.Modify(&a, masks[st]); err != nil {
			f.t.Fatalf("to %v: %v", st, err)
		}
	}
	if got := f.qp.State(); got != s {
		f.t.Fatalf("state %v, want %v", got, s)
	}
}

func TestModifyStateMachine(t *testing.T) {
	type tc struct {
		name    string
		from    rdma.QPState
		attr    func(f *modifyFixture) rdma.QPAttr
		mask    rdma.QPAttrMask
		wantErr string // substring of the error; "" = success
		want    rdma.QPState
	}
	good := func(s rdma.QPState) func(f *modifyFixture) rdma.QPAttr {
		return func(f *modifyFixture) rdma.QPAttr { return f.good[s] }
	}
	with := func(s rdma.QPState, edit func(a *rdma.QPAttr)) func(f *modifyFixture) rdma.QPAttr {
		return func(f *modifyFixture) rdma.QPAttr { a := f.good[s]; edit(&a); return a }
	}
	state := func(s rdma.QPState) func(f *modifyFixture) rdma.QPAttr {
		return func(*modifyFixture) rdma.QPAttr { return rdma.QPAttr{QPState: s} }
	}
	cases := []tc{
		// Legal transitions.
		{"RESET->INIT", rdma.QPStateReset, good(rdma.QPStateInit), mInit, "", rdma.QPStateInit},
		{"RESET->RESET", rdma.QPStateReset, state(rdma.QPStateReset), rdma.QPAttrState, "", rdma.QPStateReset},
		{"INIT->INIT optional", rdma.QPStateInit, good(rdma.QPStateInit), mInit, "", rdma.QPStateInit},
		{"INIT->INIT no attrs", rdma.QPStateInit, state(rdma.QPStateInit), rdma.QPAttrState, "", rdma.QPStateInit},
		{"INIT->RTR", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR, "", rdma.QPStateRTR},
		{"INIT->RTR with optional PKeyIndex", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR | rdma.QPAttrPKeyIndex, "", rdma.QPStateRTR},
		{"RTR->RTS", rdma.QPStateRTR, good(rdma.QPStateRTS), mRTS, "", rdma.QPStateRTS},
		{"RTR->RTS with MinRNRTimer", rdma.QPStateRTR, good(rdma.QPStateRTS), mRTS | rdma.QPAttrMinRNRTimer, "", rdma.QPStateRTS},
		{"RTS->RTS", rdma.QPStateRTS, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.MinRNRTimer = 3 }), rdma.QPAttrState | rdma.QPAttrMinRNRTimer, "", rdma.QPStateRTS},
		{"RTS->RTS CurState", rdma.QPStateRTS, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.CurQPState = rdma.QPStateRTS }), rdma.QPAttrState | rdma.QPAttrCurState, "", rdma.QPStateRTS},
		{"RTS->SQD", rdma.QPStateRTS, state(rdma.QPStateSQD), rdma.QPAttrState, "", rdma.QPStateSQD},
		{"RTS->SQD notify", rdma.QPStateRTS, state(rdma.QPStateSQD), rdma.QPAttrState | rdma.QPAttrEnSQDAsyncNotify, "", rdma.QPStateSQD},
		{"SQD->RTS", rdma.QPStateSQD, state(rdma.QPStateRTS), rdma.QPAttrState, "", rdma.QPStateRTS},
		{"SQD->SQD timeout", rdma.QPStateSQD, with(rdma.QPStateSQD, func(a *rdma.QPAttr) { a.Timeout = 10 }), rdma.QPAttrState | rdma.QPAttrTimeout, "", rdma.QPStateSQD},
		{"INIT->ERR", rdma.QPStateInit, state(rdma.QPStateErr), rdma.QPAttrState, "", rdma.QPStateErr},
		{"RTR->ERR", rdma.QPStateRTR, state(rdma.QPStateErr), rdma.QPAttrState, "", rdma.QPStateErr},
		{"RTS->ERR", rdma.QPStateRTS, state(rdma.QPStateErr), rdma.QPAttrState, "", rdma.QPStateErr},
		{"SQD->ERR", rdma.QPStateSQD, state(rdma.QPStateErr), rdma.QPAttrState, "", rdma.QPStateErr},
		{"ERR->ERR", rdma.QPStateErr, state(rdma.QPStateErr), rdma.QPAttrState, "", rdma.QPStateErr},
		{"ERR->RESET", rdma.QPStateErr, state(rdma.QPStateReset), rdma.QPAttrState, "", rdma.QPStateReset},
		{"RTS->RESET", rdma.QPStateRTS, state(rdma.QPStateReset), rdma.QPAttrState, "", rdma.QPStateReset},
		{"RTR->RESET", rdma.QPStateRTR, state(rdma.QPStateReset), rdma.QPAttrState, "", rdma.QPStateReset},

		// Illegal transitions.
		{"RESET->RTR", rdma.QPStateReset, good(rdma.QPStateRTR), mRTR, "illegal state transition", rdma.QPStateReset},
		{"RESET->RTS", rdma.QPStateReset, good(rdma.QPStateRTS), mRTS, "illegal state transition", rdma.QPStateReset},
		{"RESET->ERR", rdma.QPStateReset, state(rdma.QPStateErr), rdma.QPAttrState, "illegal state transition", rdma.QPStateReset},
		{"INIT->RTS", rdma.QPStateInit, good(rdma.QPStateRTS), mRTS, "illegal state transition", rdma.QPStateInit},
		{"INIT->SQD", rdma.QPStateInit, state(rdma.QPStateSQD), rdma.QPAttrState, "illegal state transition", rdma.QPStateInit},
		{"RTR->INIT", rdma.QPStateRTR, good(rdma.QPStateInit), mInit, "illegal state transition", rdma.QPStateRTR},
		{"RTR->RTR", rdma.QPStateRTR, good(rdma.QPStateRTR), mRTR, "illegal state transition", rdma.QPStateRTR},
		{"RTS->RTR", rdma.QPStateRTS, good(rdma.QPStateRTR), mRTR, "illegal state transition", rdma.QPStateRTS},
		{"ERR->RTS", rdma.QPStateErr, good(rdma.QPStateRTS), mRTS, "illegal state transition", rdma.QPStateErr},
		{"ERR->INIT", rdma.QPStateErr, good(rdma.QPStateInit), mInit, "illegal state transition", rdma.QPStateErr},
		{"to SQE", rdma.QPStateRTS, state(rdma.QPStateSQE), rdma.QPAttrState, "illegal state transition", rdma.QPStateRTS},
		{"no such state", rdma.QPStateRTS, state(rdma.QPState(9)), rdma.QPAttrState, "no such state", rdma.QPStateRTS},

		// Required attributes missing.
		{"INIT missing AccessFlags", rdma.QPStateReset, good(rdma.QPStateInit), mInit &^ rdma.QPAttrAccessFlags, "missing required attribute(s) AccessFlags", rdma.QPStateReset},
		{"INIT missing Port+PKey", rdma.QPStateReset, good(rdma.QPStateInit), rdma.QPAttrState | rdma.QPAttrAccessFlags, "missing required attribute(s) PKeyIndex|Port", rdma.QPStateReset},
		{"RTR missing AV", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR &^ rdma.QPAttrAV, "missing required attribute(s) AV", rdma.QPStateInit},
		{"RTR missing MinRNRTimer", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR &^ rdma.QPAttrMinRNRTimer, "MinRNRTimer", rdma.QPStateInit},
		{"RTR missing MaxDestRDAtomic", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR &^ rdma.QPAttrMaxDestRDAtomic, "MaxDestRDAtomic", rdma.QPStateInit},
		{"RTS missing SQPSN", rdma.QPStateRTR, good(rdma.QPStateRTS), mRTS &^ rdma.QPAttrSQPSN, "missing required attribute(s) SQPSN", rdma.QPStateRTR},
		{"RTS missing Timeout+RetryCnt", rdma.QPStateRTR, good(rdma.QPStateRTS), mRTS &^ (rdma.QPAttrTimeout | rdma.QPAttrRetryCnt), "Timeout|RetryCnt", rdma.QPStateRTR},

		// Attributes not allowed in the transition.
		{"INIT with QKey (UD only)", rdma.QPStateReset, good(rdma.QPStateInit), mInit | rdma.QPAttrQKey, "attribute(s) QKey not allowed", rdma.QPStateReset},
		{"RTR with SQPSN", rdma.QPStateInit, good(rdma.QPStateRTR), mRTR | rdma.QPAttrSQPSN, "attribute(s) SQPSN not allowed", rdma.QPStateInit},
		{"RTS with PathMTU", rdma.QPStateRTR, good(rdma.QPStateRTS), mRTS | rdma.QPAttrPathMTU, "attribute(s) PathMTU not allowed", rdma.QPStateRTR},
		{"RTS->RTS with AV", rdma.QPStateRTS, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.QPState = rdma.QPStateRTS }), rdma.QPAttrState | rdma.QPAttrAV, "attribute(s) AV not allowed", rdma.QPStateRTS},
		{"to ERR with Timeout", rdma.QPStateRTS, with(rdma.QPStateErr, func(a *rdma.QPAttr) { a.Timeout = 3 }), rdma.QPAttrState | rdma.QPAttrTimeout, "Timeout not allowed", rdma.QPStateRTS},
		{"Cap", rdma.QPStateRTS, state(rdma.QPStateRTS), rdma.QPAttrState | rdma.QPAttrCap, "Cap not allowed", rdma.QPStateRTS},
		{"CurState in INIT", rdma.QPStateInit, with(rdma.QPStateInit, func(a *rdma.QPAttr) { a.CurQPState = rdma.QPStateInit }), mInit | rdma.QPAttrCurState, "CurState may only be given", rdma.QPStateInit},
		{"CurState mismatch", rdma.QPStateRTS, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.CurQPState = rdma.QPStateSQD }), rdma.QPAttrState | rdma.QPAttrCurState, "CurQPState SQD is not the QP's state RTS", rdma.QPStateRTS},

		// Invalid values.
		{"PKeyIndex 1", rdma.QPStateReset, with(rdma.QPStateInit, func(a *rdma.QPAttr) { a.PKeyIndex = 1 }), mInit, "PKeyIndex 1", rdma.QPStateReset},
		{"port 2", rdma.QPStateReset, with(rdma.QPStateInit, func(a *rdma.QPAttr) { a.PortNum = 2 }), mInit, "port 2", rdma.QPStateReset},
		{"PathMTU above active", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.PathMTU = rdma.MTU4096 }), mRTR, "exceeds the port's active MTU", rdma.QPStateInit},
		{"PathMTU code 0", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.PathMTU = 0 }), mRTR, "PathMTU 0", rdma.QPStateInit},
		{"AV without GRH", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.AHAttr.IsGlobal = false }), mRTR, "RoCE needs a GRH", rdma.QPStateInit},
		{"AV without DMAC", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.AHAttr.DMAC = [6]byte{} }), mRTR, "DMAC not set", rdma.QPStateInit},
		{"AV bad SGID index", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.AHAttr.GRH.SGIDIndex = 9 }), mRTR, "SGID index 9", rdma.QPStateInit},
		{"AV family mismatch", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.AHAttr.GRH.SGIDIndex = 0 }), mRTR, "different IP families", rdma.QPStateInit},
		{"DestQPN over 24 bits", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.DestQPNum = 1 << 24 }), mRTR, "exceeds 24 bits", rdma.QPStateInit},
		{"MinRNRTimer 32", rdma.QPStateInit, with(rdma.QPStateRTR, func(a *rdma.QPAttr) { a.MinRNRTimer = 32 }), mRTR, "MinRNRTimer 32", rdma.QPStateInit},
		{"Timeout 32", rdma.QPStateRTR, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.Timeout = 32 }), mRTS, "Timeout 32", rdma.QPStateRTR},
		{"RetryCnt 8", rdma.QPStateRTR, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.RetryCnt = 8 }), mRTS, "RetryCnt 8", rdma.QPStateRTR},
		{"RNRRetry 8", rdma.QPStateRTR, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.RNRRetry = 8 }), mRTS, "RNRRetry 8", rdma.QPStateRTR},
		{"MaxRDAtomic too big", rdma.QPStateRTR, with(rdma.QPStateRTS, func(a *rdma.QPAttr) { a.MaxRDAtomic = 200 }), mRTS, "MaxRDAtomic 200", rdma.QPStateRTR},
		{"QP access bits", rdma.QPStateReset, with(rdma.QPStateInit, func(a *rdma.QPAttr) { a.QPAccessFlags = rdma.AccessZeroBased }), mInit, "QPAccessFlags", rdma.QPStateReset},
		{"unknown mask bit", rdma.QPStateRTS, state(rdma.QPStateRTS), rdma.QPAttrState | 1<<25, "unknown attribute mask bits", rdma.QPStateRTS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newModifyFixture(t)
			f.to(c.from)
			a := c.attr(f)
			err := f.qp.Modify(&a, c.mask)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("no error, want %q", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("error %q, want it to mention %q", err, c.wantErr)
			case c.wantErr != "" && !errors.Is(err, rdma.ErrInvalid):
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if got := f.qp.State(); got != c.want {
				t.Fatalf("state %v, want %v", got, c.want)
			}
		})
	}
}

func TestModifyAltPathUnsupported(t *testing.T) {
	f := newModifyFixture(t)
	f.to(rdma.QPStateInit)
	a := f.good[rdma.QPStateRTR]
	err := f.qp.Modify(&a, mRTR|rdma.QPAttrAltPath)
	if !errors.Is(err, rdma.ErrUnsupported) {
		t.Fatalf("alt path: %v, want ErrUnsupported", err)
	}
}

func TestQueryQP(t *testing.T) {
	f := newModifyFixture(t)
	f.to(rdma.QPStateRTS)
	a, init := f.qp.Query()
	g := f.good
	if a.QPState != rdma.QPStateRTS || a.CurQPState != rdma.QPStateRTS || a.PathMTU != rdma.MTU1024 ||
		a.DestQPNum != g[rdma.QPStateRTR].DestQPNum || a.RQPSN != 5 || a.SQPSN != 7 || a.Timeout != 14 ||
		a.RetryCnt != 7 || a.RNRRetry != 7 || a.MinRNRTimer != 12 || a.MaxRDAtomic != 1 || a.MaxDestRDAtomic != 1 ||
		a.QPAccessFlags != rdma.AccessRemoteWrite || a.AHAttr.GRH.DGID != g[rdma.QPStateRTR].AHAttr.GRH.DGID || a.PortNum != 1 {
		t.Fatalf("query: %+v", a)
	}
	if init.QPType != rdma.QPTypeRC || init.Cap.MaxSendWR != f.p.o.sendWR || init.SendCQ != f.p.a.scq {
		t.Fatalf("init attr: %+v", init)
	}
	f.p.a.dev.Close()
	if a, _ := f.qp.Query(); a.QPState != rdma.QPStateErr || a.SQPSN != 7 || a.DestQPNum != g[rdma.QPStateRTR].DestQPNum {
		t.Fatalf("query after Close: %+v", a)
	}
}

// TestResetDiscards: RESET empties the queues without completions and the
// QP can be brought up again.
func TestResetDiscards(t *testing.T) {
	p := newPair(t, pairOpts{})
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0, 64)}}))
	a := rdma.QPAttr{QPState: rdma.QPStateReset}
	if err := p.qb.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	p.expectNone(p.b.rcq, "after RESET")
	if err := p.qb.PostRecv([]rdma.RecvWR{{WRID: 2}}); !errors.Is(err, rdma.ErrInvalidState) {
		t.Fatalf("post recv in RESET: %v", err)
	}
	p.connect(p.qb, p.qa, p.a)
	// qa still expects qb's old PSNs; reconnect it too.
	a = rdma.QPAttr{QPState: rdma.QPStateReset}
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	p.connect(p.qa, p.qb, p.b)
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 3, SGList: p.b.sge(0, 64)}}))
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 4, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, 10)}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 4, rdma.WCSuccess, rdma.WCSend)
	wantWC(t, p.poll(p.b.rcq, 1)[0], 3, rdma.WCSuccess, rdma.WCRecv)
}

// TestSQD: in SQD new send WRs are queued, not started; back in RTS they run.
func TestSQD(t *testing.T) {
	p := newPair(t, pairOpts{})
	a := rdma.QPAttr{QPState: rdma.QPStateSQD}
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 10), RKey: p.b.mr.RKey}}))
	p.expectNone(p.a.scq, "SQD")
	if c := p.a.dev.Counters(); c.TxPackets != 0 {
		t.Fatalf("%d frames sent in SQD", c.TxPackets)
	}
	a = rdma.QPAttr{QPState: rdma.QPStateRTS}
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
}
