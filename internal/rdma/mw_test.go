package rdma_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

const mwAll = rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic

func mwOpts() pairOpts {
	return pairOpts{
		mrAccess: mwAll | rdma.AccessMWBind,
		qpAccess: mwAll,
	}
}

// nextKey is ibv_inc_rkey: the next variant byte, the same index.
func nextKey(k uint32) uint32 { return k&^0xff | (k+1)&0xff }

// allocMW allocates a window on n's PD.
func (n *node) allocMW(t *testing.T, typ rdma.MWType) *rdma.MW {
	t.Helper()
	mw, err := n.dev.AllocMW(n.pd, typ)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// bind posts a signaled BIND_MW on qp and returns the new R_Key and the
// completion.
func (p *pair) bind(qp *rdma.QP, n *node, mw *rdma.MW, addr, length uint64, access rdma.Access) (uint32, rdma.WC) {
	p.t.Helper()
	newKey := nextKey(mw.RKey())
	mustPost(p.t, qp.PostSend([]rdma.SendWR{{WRID: 77, Opcode: rdma.WRBindMW, SendFlags: rdma.SendSignaled,
		Bind: rdma.MWBind{MWKey: mw.RKey(), NewRKey: newKey, LKey: n.mr.LKey, Addr: addr, Length: length, Access: access}}}))
	return newKey, p.poll(n.scq, 1)[0]
}

// write RDMA-writes 8 bytes from a's offset 0 to b's va with rkey and
// returns the requester's completion.
func (p *pair) write8(rkey uint32, va uint64) rdma.WC {
	p.t.Helper()
	mustPost(p.t, p.qa.PostSend([]rdma.SendWR{{WRID: 5, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 8), RemoteAddr: va, RKey: rkey}}))
	return p.poll(p.a.scq, 1)[0]
}

func TestMWType2BindWriteReadAtomic(t *testing.T) {
	p := newPair(t, mwOpts())
	mw := p.b.allocMW(t, rdma.MWType2)
	key, wc := p.bind(p.qb, p.b, mw, 0x1000, 0x100, rdma.AccessRemoteWrite|rdma.AccessRemoteRead|rdma.AccessRemoteAtomic)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	if key&0x80000000 == 0 || mw.RKey() != key {
		t.Fatalf("window key %#x after bind, want %#x with bit 31", mw.RKey(), key)
	}
	copy(p.a.mem.Bytes()[0:8], "windowed")
	wantWC(t, p.write8(key, 0x10f8), 5, rdma.WCSuccess, rdma.WCRDMAWrite)
	if got := p.b.mem.Bytes()[0x10f8:0x1100]; string(got) != "windowed" {
		t.Fatalf("write through the window placed %q", got)
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 6, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x100, 8), RemoteAddr: 0x10f8, RKey: key}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 6, rdma.WCSuccess, rdma.WCRDMARead)
	if got := p.a.mem.Bytes()[0x100:0x108]; string(got) != "windowed" {
		t.Fatalf("read through the window got %q", got)
	}
	binary.LittleEndian.PutUint64(p.b.mem.Bytes()[0x1000:], 40)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 7, Opcode: rdma.WRAtomicFetchAndAdd, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x200, 8), RemoteAddr: 0x1000, RKey: key, CompareAdd: 2}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 7, rdma.WCSuccess, rdma.WCFetchAdd)
	if v := binary.LittleEndian.Uint64(p.b.mem.Bytes()[0x1000:]); v != 42 {
		t.Fatalf("fetch-add through the window left %d", v)
	}
	if c := p.b.dev.Counters(); c.MWBinds != 1 {
		t.Fatalf("MWBinds %d, want 1", c.MWBinds)
	}
}

// TestMWRemoteChecks: each request the responder must refuse for a
// window's R_Key completes with a remote access error. Every case needs a
// fresh pair (the error moves both QPs to ERR).
func TestMWRemoteChecks(t *testing.T) {
	cases := []struct {
		name   string
		access rdma.Access
		run    func(p *pair, mw *rdma.MW, key uint32) rdma.WC
	}{
		{"past the end", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			return p.write8(key, 0x10f9)
		}},
		{"before the start", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			return p.write8(key, 0xff8)
		}},
		{"no remote write", rdma.AccessRemoteRead | rdma.AccessLocalWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			return p.write8(key, 0x1000)
		}},
		{"old key", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			return p.write8(key^1, 0x1000)
		}},
		{"no remote atomic", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			mustPost(p.t, p.qa.PostSend([]rdma.SendWR{{WRID: 5, Opcode: rdma.WRAtomicCmpAndSwp, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 8), RemoteAddr: 0x1000, RKey: key}}))
			return p.poll(p.a.scq, 1)[0]
		}},
		{"after local invalidate", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			mustPost(p.t, p.qb.PostSend([]rdma.SendWR{{WRID: 8, Opcode: rdma.WRLocalInv, SendFlags: rdma.SendSignaled, ImmData: key}}))
			wantWC(p.t, p.poll(p.b.scq, 1)[0], 8, rdma.WCSuccess, rdma.WCLocalInv)
			return p.write8(key, 0x1000)
		}},
		{"after dealloc", rdma.AccessRemoteWrite, func(p *pair, mw *rdma.MW, key uint32) rdma.WC {
			if err := mw.Dealloc(); err != nil {
				p.t.Fatal(err)
			}
			return p.write8(key, 0x1000)
		}},
		{"after MR dereg", rdma.AccessRemoteWrite, func(p *pair, _ *rdma.MW, key uint32) rdma.WC {
			if err := p.b.mr.Dereg(); err != nil {
				p.t.Fatal(err)
			}
			return p.write8(key, 0x1000)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, mwOpts())
			mw := p.b.allocMW(t, rdma.MWType2)
			key, wc := p.bind(p.qb, p.b, mw, 0x1000, 0x100, c.access)
			wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
			if wc := c.run(p, mw, key); wc.Status != rdma.WCRemAccessErr {
				t.Fatalf("completion %+v (%v), want remote access error", wc, wc.Status)
			}
		})
	}
}

// TestMWType2OtherQP: a type 2 window grants access only to requests
// arriving on the QP it was bound on, even from the same PD.
func TestMWType2OtherQP(t *testing.T) {
	o := mwOpts()
	p := newPair(t, o)
	mw := p.b.allocMW(t, rdma.MWType2)
	key, wc := p.bind(p.qb, p.b, mw, 0x1000, 0x100, rdma.AccessRemoteWrite)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	qc, qd := p.a.createQP(t, &p.o), p.b.createQP(t, &p.o)
	p.connect(qc, qd, p.b)
	p.connect(qd, qc, p.a)
	mustPost(t, qc.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 8), RemoteAddr: 0x1000, RKey: key}}))
	if wc := p.poll(p.a.scq, 1)[0]; wc.WRID != 9 || wc.Status != rdma.WCRemAccessErr {
		t.Fatalf("write through another QP: %+v (%v), want remote access error", wc, wc.Status)
	}
	wantWC(t, p.write8(key, 0x1000), 5, rdma.WCSuccess, rdma.WCRDMAWrite)
}

func TestMWType1(t *testing.T) {
	p := newPair(t, mwOpts())
	mw := p.b.allocMW(t, rdma.MWType1)
	key, wc := p.bind(p.qb, p.b, mw, 0x2000, 0x40, rdma.AccessRemoteWrite)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	wantWC(t, p.write8(key, 0x2000), 5, rdma.WCSuccess, rdma.WCRDMAWrite)
	// A type 1 window rebinds in place; binding with length 0 unbinds.
	key2, wc := p.bind(p.qb, p.b, mw, 0x2000, 0, 0)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	if _, _, _, ok := mw.Bound(); ok || key2 == key {
		t.Fatalf("after a zero-length bind: bound %v, key %#x (was %#x)", ok, key2, key)
	}
	if wc := p.write8(key2, 0x2000); wc.Status != rdma.WCRemAccessErr {
		t.Fatalf("write to an unbound type 1 window: %+v (%v)", wc, wc.Status)
	}
}

// TestMWType1NoInvalidate: a type 1 window cannot be invalidated by
// LOCAL_INV (IBA 10.6.7.2.6).
func TestMWType1NoInvalidate(t *testing.T) {
	p := newPair(t, mwOpts())
	mw := p.b.allocMW(t, rdma.MWType1)
	key, wc := p.bind(p.qb, p.b, mw, 0x2000, 0x40, rdma.AccessRemoteWrite)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	mustPost(t, p.qb.PostSend([]rdma.SendWR{{WRID: 8, Opcode: rdma.WRLocalInv, SendFlags: rdma.SendSignaled, ImmData: key}}))
	if wc := p.poll(p.b.scq, 1)[0]; wc.Status != rdma.WCLocQPOpErr || wc.Opcode != rdma.WCLocalInv {
		t.Fatalf("LOCAL_INV of a type 1 window: %+v (%v)", wc, wc.Status)
	}
	if _, _, _, ok := mw.Bound(); !ok {
		t.Fatal("type 1 window unbound by LOCAL_INV")
	}
}

// TestMWBindErrors: each bad bind completes with MW_BIND_ERR (and the QP
// goes to ERR), leaving the window as it was.
func TestMWBindErrors(t *testing.T) {
	cases := []struct {
		name string
		typ  rdma.MWType
		bind func(p *pair, mw *rdma.MW) rdma.MWBind
	}{
		{"beyond the MR", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			return rdma.MWBind{Addr: uint64(p.o.memSize) - 8, Length: 16, Access: rdma.AccessRemoteWrite}
		}},
		{"type 2 zero length", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			return rdma.MWBind{Addr: 0x1000, Length: 0}
		}},
		{"zero based", rdma.MWType1, func(p *pair, mw *rdma.MW) rdma.MWBind {
			return rdma.MWBind{Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite | rdma.AccessZeroBased}
		}},
		{"key of another window", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			return rdma.MWBind{NewRKey: (mw.RKey() + 0x100), Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
		{"bad lkey", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			return rdma.MWBind{LKey: p.b.mr.LKey ^ 0x55, Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
		{"unknown window", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			k := mw.RKey() + 0x7f0000
			return rdma.MWBind{MWKey: k, NewRKey: k, Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
		{"MR without MW_BIND", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			mr, err := p.b.dev.RegMR(p.b.pd, 0, 0x10000, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
			if err != nil {
				p.t.Fatal(err)
			}
			return rdma.MWBind{LKey: mr.LKey, Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
		{"remote write on an MR without local write", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			mr, err := p.b.dev.RegMR(p.b.pd, 0, 0x10000, rdma.AccessRemoteRead|rdma.AccessMWBind)
			if err != nil {
				p.t.Fatal(err)
			}
			return rdma.MWBind{LKey: mr.LKey, Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
		{"window of another PD", rdma.MWType2, func(p *pair, mw *rdma.MW) rdma.MWBind {
			pd, err := p.b.dev.AllocPD()
			if err != nil {
				p.t.Fatal(err)
			}
			other, err := p.b.dev.AllocMW(pd, rdma.MWType2)
			if err != nil {
				p.t.Fatal(err)
			}
			return rdma.MWBind{MWKey: other.RKey(), NewRKey: other.RKey(), Addr: 0x1000, Length: 8, Access: rdma.AccessRemoteWrite}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, mwOpts())
			mw := p.b.allocMW(t, c.typ)
			before := mw.RKey()
			b := c.bind(p, mw)
			if b.MWKey == 0 {
				b.MWKey = mw.RKey()
			}
			if b.NewRKey == 0 {
				b.NewRKey = nextKey(mw.RKey())
			}
			if b.LKey == 0 {
				b.LKey = p.b.mr.LKey
			}
			mustPost(t, p.qb.PostSend([]rdma.SendWR{{WRID: 3, Opcode: rdma.WRBindMW, Bind: b},
				{WRID: 4, Opcode: rdma.WRSend, SGList: p.b.sge(0, 8)}}))
			got := p.poll(p.b.scq, 2)
			wantWC(t, got[0], 3, rdma.WCMWBindErr, rdma.WCBindMW)
			wantWC(t, got[1], 4, rdma.WCWRFlushErr, rdma.WCSend)
			if _, _, _, ok := mw.Bound(); ok || mw.RKey() != before {
				t.Fatalf("window changed by a failed bind: bound %v, key %#x, was %#x", ok, mw.RKey(), before)
			}
		})
	}
	t.Run("type 2 bound twice", func(t *testing.T) {
		p := newPair(t, mwOpts())
		mw := p.b.allocMW(t, rdma.MWType2)
		_, wc := p.bind(p.qb, p.b, mw, 0x1000, 8, rdma.AccessRemoteWrite)
		wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
		_, wc = p.bind(p.qb, p.b, mw, 0x1000, 8, rdma.AccessRemoteWrite)
		wantWC(t, wc, 77, rdma.WCMWBindErr, rdma.WCBindMW)
	})
}

// TestMWLocalInvErrors: LOCAL_INV of something that is not a bound type
// 2 window completes with LOC_QP_OP_ERR, as in rxe.
func TestMWLocalInvErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		key  func(p *pair, mw *rdma.MW) uint32
	}{
		{"an MR", func(p *pair, _ *rdma.MW) uint32 { return p.b.mr.RKey }},
		{"a free window", func(_ *pair, mw *rdma.MW) uint32 { return mw.RKey() }},
		{"a stale key", func(p *pair, mw *rdma.MW) uint32 {
			key, wc := p.bind(p.qb, p.b, mw, 0x1000, 8, rdma.AccessRemoteWrite)
			wantWC(p.t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
			return key ^ 0x3
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, mwOpts())
			mw := p.b.allocMW(t, rdma.MWType2)
			key := c.key(p, mw)
			mustPost(t, p.qb.PostSend([]rdma.SendWR{{WRID: 8, Opcode: rdma.WRLocalInv, ImmData: key}}))
			wantWC(t, p.poll(p.b.scq, 1)[0], 8, rdma.WCLocQPOpErr, rdma.WCLocalInv)
		})
	}
}

// TestSendWithInvalidate checks the wire (SEND_ONLY_WITH_INVALIDATE and
// SEND_FIRST + SEND_LAST_WITH_INVALIDATE, each with its IETH), the
// receiver's completion, and that the window is free afterwards.
func TestSendWithInvalidate(t *testing.T) {
	for _, size := range []uint32{16, 2500} {
		p, ia, _ := newInterceptPair(t, mwOpts())
		ia.mu.Lock()
		ia.keep = true
		ia.mu.Unlock()
		mw := p.b.allocMW(t, rdma.MWType2)
		key, wc := p.bind(p.qb, p.b, mw, 0x1000, 0x100, rdma.AccessRemoteWrite)
		wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 4096)}}))
		fill(p.a.mem.Bytes()[0x4000:0x4000+size], 3)
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRSendWithInv, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(0x4000, size), ImmData: key}}))
		wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCSend)
		rc := p.poll(p.b.rcq, 1)[0]
		wantWC(t, rc, 1, rdma.WCSuccess, rdma.WCRecv)
		if rc.WCFlags != rdma.WCWithInv || rc.ImmData != key || rc.ByteLen != size {
			t.Fatalf("receive completion %+v, want WithInv, invalidated key %#x, %d bytes", rc, key, size)
		}
		if !bytes.Equal(p.b.mem.Bytes()[0x8000:0x8000+size], p.a.mem.Bytes()[0x4000:0x4000+size]) {
			t.Fatal("payload differs")
		}
		if _, _, _, ok := mw.Bound(); ok || mw.RKey() != key {
			t.Fatalf("window after SEND_WITH_INV: bound %v, key %#x", ok, mw.RKey())
		}
		var ops []proto.Opcode
		var ieth []uint32
		for _, f := range ia.captured() {
			pkt, err := proto.Parse(f, proto.LinkEthernet)
			if err != nil {
				t.Fatal(err)
			}
			if pkt.BTH.Opcode().Info().Kind != proto.KindSend {
				continue
			}
			ops = append(ops, pkt.BTH.Opcode())
			if pkt.IETH != nil {
				ieth = append(ieth, pkt.IETH.RKey())
				// Wire-exact: the IETH is the 4 bytes right after the
				// BTH (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12), big-endian.
				if got := binary.BigEndian.Uint32(f[54:58]); got != key {
					t.Fatalf("IETH bytes %x, want %#x", f[54:58], key)
				}
			}
		}
		want := []proto.Opcode{proto.OpRCSendOnlyInvalidate}
		if size > 1024 {
			want = []proto.Opcode{proto.OpRCSendFirst, proto.OpRCSendMiddle, proto.OpRCSendLastInvalidate}
		}
		if len(ops) != len(want) || len(ieth) != 1 || ieth[0] != key {
			t.Fatalf("%d bytes: opcodes %v IETH keys %#x, want %v and one IETH %#x", size, ops, ieth, want, key)
		}
		for i := range want {
			if ops[i] != want[i] {
				t.Fatalf("%d bytes: opcodes %v, want %v", size, ops, want)
			}
		}
		if wc := p.write8(key, 0x1000); wc.Status != rdma.WCRemAccessErr {
			t.Fatalf("write after remote invalidation: %+v (%v)", wc, wc.Status)
		}
	}
}

// TestSendWithInvalidateBadKey: a SEND_WITH_INV whose key the receiver
// cannot invalidate fails on both sides.
func TestSendWithInvalidateBadKey(t *testing.T) {
	p := newPair(t, mwOpts())
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 64)}}))
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRSendWithInv, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 16), ImmData: p.b.mr.RKey}}))
	if wc := p.poll(p.a.scq, 1)[0]; wc.WRID != 2 || wc.Status != rdma.WCRemInvReqErr {
		t.Fatalf("sender: %+v (%v), want remote invalid request", wc, wc.Status)
	}
	if wc := p.poll(p.b.rcq, 1)[0]; wc.WRID != 1 || wc.Status != rdma.WCRemInvReqErr {
		t.Fatalf("receiver: %+v (%v), want remote invalid request", wc, wc.Status)
	}
}

// TestMWBindOrdering: a bind waits for the WRs posted before it, and its
// completion comes after theirs.
func TestMWBindOrdering(t *testing.T) {
	p := newPair(t, mwOpts())
	mw := p.a.allocMW(t, rdma.MWType2)
	newKey := nextKey(mw.RKey())
	mustPost(t, p.qa.PostSend([]rdma.SendWR{
		{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, 4000), RemoteAddr: 0x1000, RKey: p.b.mr.RKey},
		{WRID: 2, Opcode: rdma.WRBindMW, SendFlags: rdma.SendSignaled,
			Bind: rdma.MWBind{MWKey: mw.RKey(), NewRKey: newKey, LKey: p.a.mr.LKey, Addr: 0, Length: 64, Access: rdma.AccessRemoteRead}},
		{WRID: 3, Opcode: rdma.WRLocalInv, SendFlags: rdma.SendSignaled, ImmData: newKey},
	}))
	got := p.poll(p.a.scq, 3)
	wantWC(t, got[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
	wantWC(t, got[1], 2, rdma.WCSuccess, rdma.WCBindMW)
	wantWC(t, got[2], 3, rdma.WCSuccess, rdma.WCLocalInv)
	if c := p.a.dev.Counters(); c.MWBinds != 1 || c.MWInvalidates != 1 {
		t.Fatalf("counters: %d binds, %d invalidations", c.MWBinds, c.MWInvalidates)
	}
}

func TestAllocMWLimits(t *testing.T) {
	p := newPair(t, mwOpts())
	if _, err := p.a.dev.AllocMW(p.a.pd, 3); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("type 3: %v", err)
	}
	mw := p.a.allocMW(t, rdma.MWType1)
	if err := p.a.pd.Dealloc(); !isErr(err, rdma.ErrBusy) {
		t.Fatalf("dealloc PD with a window: %v", err)
	}
	if err := mw.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := mw.Dealloc(); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("second dealloc: %v", err)
	}
	if a := p.a.dev.QueryDevice(); a.MaxMW != rdma.DefaultMaxMW ||
		a.DeviceCapFlags&(rdma.DeviceMemWindow|rdma.DeviceMemWindowType2B) != rdma.DeviceMemWindow|rdma.DeviceMemWindowType2B {
		t.Fatalf("device attrs: max_mw %d, cap flags %#x", a.MaxMW, a.DeviceCapFlags)
	}
}
