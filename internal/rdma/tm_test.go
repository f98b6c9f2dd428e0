package rdma_test

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// tmSetup is an srqSetup whose SRQ is a tag-matching SRQ; its CQ is the
// receivers' receive CQ, as in rdma-core's tests/test_tag_matching.py.
// s1 sends to r1; s1's own RQ gets the FINs of rendezvous messages.
type tmSetup struct {
	*srqSetup
	tagBase uint64 // tagged buffers on b: 1 KiB each from here
}

func newTMSetup(t *testing.T, maxTags int) *tmSetup {
	t.Helper()
	p := newPair(t, pairOpts{})
	srq, err := p.b.dev.CreateSRQ(p.b.pd, rdma.SRQInitAttr{MaxWR: 16, MaxSGE: 1, CQ: p.b.rcq,
		TM: &rdma.TMAttr{MaxNumTags: maxTags, MaxOps: 8}})
	if err != nil {
		t.Fatal(err)
	}
	s := &srqSetup{pair: p, srq: srq, recvBase: 0x40000}
	r, err := p.b.dev.CreateQP(p.b.pd, rdma.QPInitAttr{SendCQ: p.b.scq, RecvCQ: p.b.rcq, QPType: rdma.QPTypeRC,
		SRQ: srq, Cap: rdma.QPCap{MaxSendWR: 0, MaxSendSGE: 0}})
	if err != nil {
		t.Fatal(err)
	}
	s.s1, s.r1 = p.a.createQP(t, &p.o), r
	p.connect(s.s1, s.r1, p.b)
	p.connect(s.r1, s.s1, p.a)
	return &tmSetup{srqSetup: s, tagBase: 0x60000}
}

// add posts a signaled TAG_ADD of tagged buffer handle h (1 KiB at
// tagBase + h KiB) and returns its completion.
func (s *tmSetup) add(t *testing.T, h uint32, tag, mask uint64, unexp uint32) rdma.WC {
	t.Helper()
	mustPost(t, s.srq.PostOps([]rdma.TMOp{{WRID: 1000 + uint64(h), Opcode: rdma.TMTagAdd, Flags: rdma.TMOpSignaled,
		UnexpectedCnt: unexp, Handle: h, RecvWRID: 500 + uint64(h), Tag: tag, Mask: mask,
		SGList: s.b.sge(s.tagBase+uint64(h)*1024, 1024)}}))
	return s.poll(s.b.rcq, 1)[0]
}

func (s *tmSetup) op(t *testing.T, op rdma.TMOp) rdma.WC {
	t.Helper()
	mustPost(t, s.srq.PostOps([]rdma.TMOp{op}))
	return s.poll(s.b.rcq, 1)[0]
}

// send sends a message of n bytes from a's src: a TMH (opcode, tag,
// app_ctx 0x77) and a fill pattern after it.
func (s *tmSetup) send(t *testing.T, src uint64, n int, opcode uint8, tag uint64, seed byte) []byte {
	t.Helper()
	msg := s.a.mem.Bytes()[src : src+uint64(n)]
	fill(msg, seed)
	rdma.TMH(msg).Encode(&rdma.TMHFields{Opcode: opcode, Tag: tag, AppCtx: 0x77})
	mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: s.a.sge(src, uint32(n))}}))
	wantWC(t, s.poll(s.a.scq, 1)[0], 9, rdma.WCSuccess, rdma.WCSend)
	return append([]byte(nil), msg...)
}

func TestTMEagerMatchesInPostingOrder(t *testing.T) {
	s := newTMSetup(t, 8)
	for h := uint32(0); h < 3; h++ {
		wc := s.add(t, h, 0x100+uint64(h), 0xffff, 0)
		wantWC(t, wc, 1000+uint64(h), rdma.WCSuccess, rdma.WCTMAdd)
		if wc.WCFlags != 0 {
			t.Fatalf("ADD in sync: flags %v", wc.WCFlags)
		}
	}
	// Tag 0x10101 matches handle 1 (0x101) under mask 0xffff.
	msg := s.send(t, 0x1000, 1000, rdma.TMHEager, 0x10101, 3)
	wc := s.poll(s.b.rcq, 1)[0]
	wantWC(t, wc, 501, rdma.WCSuccess, rdma.WCTMRecv)
	if wc.WCFlags != rdma.WCTMMatch|rdma.WCTMDataValid || wc.Tag != 0x10101 || wc.TMAppCtx != 0x77 || wc.TMHandle != 1 {
		t.Fatalf("eager match: %+v", wc)
	}
	if !bytes.Equal(s.b.mem.Bytes()[s.tagBase+1024:][:1000-rdma.TMHeaderLen], msg[rdma.TMHeaderLen:]) {
		t.Fatal("tagged buffer 1 does not hold the data after the TMH")
	}
	s2 := newTMSetup(t, 8)
	s2.add(t, 0, 5, 0xff, 0)
	s2.add(t, 1, 5, 0xff, 0) // same tag: the first one posted wins
	msg = s2.send(t, 0x1000, 900, rdma.TMHEager, 5, 4)
	wc = s2.poll(s2.b.rcq, 1)[0]
	wantWC(t, wc, 500, rdma.WCSuccess, rdma.WCTMRecv)
	if wc.ByteLen != 900-rdma.TMHeaderLen || wc.Tag != 5 || wc.WCFlags != rdma.WCTMMatch|rdma.WCTMDataValid {
		t.Fatalf("eager: %+v", wc)
	}
	got := s2.b.mem.Bytes()[s2.tagBase:][:900-rdma.TMHeaderLen]
	if !bytes.Equal(got, msg[rdma.TMHeaderLen:]) {
		t.Fatal("tagged buffer does not hold the data after the TMH")
	}
	// Handle 0 is free again, handle 1 still listed.
	wantWC(t, s2.add(t, 0, 6, 0xff, 0), 1000, rdma.WCSuccess, rdma.WCTMAdd)
	wantWC(t, s2.op(t, rdma.TMOp{WRID: 3, Opcode: rdma.TMTagAdd, Handle: 1, SGList: s2.b.sge(s2.tagBase, 8)}),
		3, rdma.WCTMErr, rdma.WCTMAdd)
}

func TestTMEagerTooLongForTaggedBuffer(t *testing.T) {
	s := newTMSetup(t, 8)
	s.add(t, 0, 1, 0xff, 0)
	rdma.TMH(s.a.mem.Bytes()[0x1000:]).Encode(&rdma.TMHFields{Opcode: rdma.TMHEager, Tag: 1})
	mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: s.a.sge(0x1000, 2000)}}))
	wc := s.poll(s.b.rcq, 1)[0]
	if wc.Status != rdma.WCLocLenErr {
		t.Fatalf("1984 bytes into a 1 KiB tagged buffer: %+v", wc)
	}
}

func TestTMUnexpectedAndSync(t *testing.T) {
	s := newTMSetup(t, 8)
	s.postSRQ(t, 0, 4)
	s.add(t, 0, 1, 0xffff, 0)
	// Tag 0x1234 matches nothing: the whole message into an ordinary WR.
	msg := s.send(t, 0x1000, 200, rdma.TMHEager, 0x1234, 5)
	wc := s.poll(s.b.rcq, 1)[0]
	wantWC(t, wc, 100, rdma.WCSuccess, rdma.WCTMRecv)
	if wc.WCFlags != 0 || wc.Tag != 0 || wc.ByteLen != 200 {
		t.Fatalf("unexpected: %+v", wc)
	}
	if !bytes.Equal(s.b.mem.Bytes()[s.recvBase:][:200], msg) {
		t.Fatal("unexpected message not placed whole")
	}
	// A tag added by software that has seen 0 unexpected messages (the
	// device has seen 1) is not matched until a sync.
	wc = s.add(t, 1, 7, 0xffff, 0)
	if wc.WCFlags != rdma.WCTMSyncReq {
		t.Fatalf("ADD behind the device: flags %v, want SYNC_REQ", wc.WCFlags)
	}
	s.send(t, 0x1000, 100, rdma.TMHEager, 7, 6)
	wc = s.poll(s.b.rcq, 1)[0]
	if wc.WRID != 101 || wc.WCFlags != 0 {
		t.Fatalf("tag added out of sync was matched: %+v", wc)
	}
	// The old tag (added in sync) still matches meanwhile.
	s.send(t, 0x1000, 100, rdma.TMHEager, 1, 6)
	if wc = s.poll(s.b.rcq, 1)[0]; wc.WRID != 500 || wc.WCFlags != rdma.WCTMMatch|rdma.WCTMDataValid {
		t.Fatalf("tag added in sync: %+v", wc)
	}
	// A stale sync changes nothing; the right count resumes matching.
	wc = s.op(t, rdma.TMOp{WRID: 27, Opcode: rdma.TMTagSync, Flags: rdma.TMOpSignaled | rdma.TMOpSync, UnexpectedCnt: 1})
	wantWC(t, wc, 27, rdma.WCSuccess, rdma.WCTMSync)
	if wc.WCFlags != rdma.WCTMSyncReq {
		t.Fatalf("stale sync: %+v", wc)
	}
	wc = s.op(t, rdma.TMOp{WRID: 28, Opcode: rdma.TMTagSync, Flags: rdma.TMOpSignaled | rdma.TMOpSync, UnexpectedCnt: 2})
	wantWC(t, wc, 28, rdma.WCSuccess, rdma.WCTMSync)
	if wc.WCFlags != 0 {
		t.Fatalf("sync: %+v", wc)
	}
	s.send(t, 0x1000, 100, rdma.TMHEager, 7, 6)
	if wc = s.poll(s.b.rcq, 1)[0]; wc.WRID != 501 || wc.WCFlags != rdma.WCTMMatch|rdma.WCTMDataValid || wc.Tag != 7 {
		t.Fatalf("after sync: %+v", wc)
	}
}

func TestTMNoTagAndFin(t *testing.T) {
	s := newTMSetup(t, 8)
	s.postSRQ(t, 0, 2)
	s.add(t, 0, 0x1234, 0xffff, 0)
	msg := s.send(t, 0x1000, 64, rdma.TMHNoTag, 0x1234, 1)
	wc := s.poll(s.b.rcq, 1)[0]
	wantWC(t, wc, 100, rdma.WCSuccess, rdma.WCTMNoTag)
	if wc.WCFlags != 0 || wc.ByteLen != 64 || !bytes.Equal(s.b.mem.Bytes()[s.recvBase:][:64], msg) {
		t.Fatalf("no tag: %+v", wc)
	}
	s.send(t, 0x1000, 16, rdma.TMHFin, 0x1234, 1)
	wantWC(t, s.poll(s.b.rcq, 1)[0], 101, rdma.WCSuccess, rdma.WCRecv)
	// Neither consumed the tag nor counted as unexpected.
	s.send(t, 0x1000, 64, rdma.TMHEager, 0x1234, 1)
	if wc = s.poll(s.b.rcq, 1)[0]; wc.WRID != 500 || wc.WCFlags != rdma.WCTMMatch|rdma.WCTMDataValid {
		t.Fatalf("tag after NO_TAG and FIN: %+v", wc)
	}
}

func TestTMRendezvous(t *testing.T) {
	s := newTMSetup(t, 8)
	// The sender's receive for the FIN.
	mustPost(t, s.s1.PostRecv([]rdma.RecvWR{{WRID: 77, SGList: s.a.sge(0x9000, 64)}}))
	s.add(t, 2, 0x42, 0xffff, 0)
	data := s.a.mem.Bytes()[0x4000 : 0x4000+900]
	fill(data, 9)
	hdr := s.a.mem.Bytes()[0x1000 : 0x1000+rdma.TMMaxRndvHdr]
	rdma.TMH(hdr).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, Tag: 0x42})
	rdma.RVH(hdr[rdma.TMHeaderLen:]).Encode(&rdma.RVHFields{VA: 0x4000, RKey: s.a.mr.RKey, Len: 900})
	mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: s.a.sge(0x1000, rdma.TMMaxRndvHdr)}}))
	wcs := s.poll(s.b.rcq, 2)
	wantWC(t, wcs[0], 502, rdma.WCSuccess, rdma.WCTMRecv)
	if wcs[0].WCFlags != rdma.WCTMMatch || wcs[0].Tag != 0x42 {
		t.Fatalf("rendezvous match: %+v", wcs[0])
	}
	wantWC(t, wcs[1], 502, rdma.WCSuccess, rdma.WCTMRecv)
	if wcs[1].WCFlags != rdma.WCTMDataValid || wcs[1].ByteLen != 900 || wcs[1].Tag != 0 {
		t.Fatalf("rendezvous data: %+v", wcs[1])
	}
	if !bytes.Equal(s.b.mem.Bytes()[s.tagBase+2*1024:][:900], data) {
		t.Fatal("tagged buffer does not hold the sender's buffer")
	}
	// The sender: its SEND, then the FIN in its receive WR.
	wantWC(t, s.poll(s.a.scq, 1)[0], 9, rdma.WCSuccess, rdma.WCSend)
	fin := s.poll(s.a.rcq, 1)[0]
	wantWC(t, fin, 77, rdma.WCSuccess, rdma.WCRecv)
	if fin.ByteLen != rdma.TMHeaderLen || fin.WCFlags != 0 {
		t.Fatalf("FIN: %+v", fin)
	}
	h := rdma.TMH(s.a.mem.Bytes()[0x9000:][:rdma.TMHeaderLen])
	if h.Opcode() != rdma.TMHFin || h.Tag() != 0x42 {
		t.Fatalf("FIN header % x", []byte(h))
	}
	// No send completion on b for the device's own READ and FIN.
	s.expectNone(s.b.scq, "receiver's send CQ")
}

func TestTMRendezvousErrors(t *testing.T) {
	t.Run("longer than the tagged buffer", func(t *testing.T) {
		s := newTMSetup(t, 8)
		mustPost(t, s.s1.PostRecv([]rdma.RecvWR{{WRID: 77, SGList: s.a.sge(0x9000, 64)}}))
		s.add(t, 0, 1, 0xff, 0)
		hdr := s.a.mem.Bytes()[0x1000 : 0x1000+32]
		rdma.TMH(hdr).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, Tag: 1})
		rdma.RVH(hdr[16:]).Encode(&rdma.RVHFields{VA: 0x4000, RKey: s.a.mr.RKey, Len: 4096})
		mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 32)}}))
		wcs := s.poll(s.b.rcq, 2)
		if wcs[0].WCFlags != rdma.WCTMMatch || wcs[1].Status != rdma.WCLocLenErr || wcs[1].WRID != 500 {
			t.Fatalf("%+v", wcs)
		}
		wantWC(t, s.poll(s.a.rcq, 1)[0], 77, rdma.WCSuccess, rdma.WCRecv) // the FIN still goes
	})
	t.Run("bad rkey", func(t *testing.T) {
		s := newTMSetup(t, 8)
		s.add(t, 0, 1, 0xff, 0)
		hdr := s.a.mem.Bytes()[0x1000 : 0x1000+32]
		rdma.TMH(hdr).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, Tag: 1})
		rdma.RVH(hdr[16:]).Encode(&rdma.RVHFields{VA: 0x4000, RKey: s.a.mr.RKey ^ 0x5500, Len: 100})
		mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 32)}}))
		wcs := s.poll(s.b.rcq, 2)
		if wcs[0].WCFlags != rdma.WCTMMatch || wcs[1].Status != rdma.WCRemAccessErr || wcs[1].Opcode != rdma.WCTMRecv {
			t.Fatalf("%+v", wcs)
		}
	})
	t.Run("RVH cut short", func(t *testing.T) {
		s := newTMSetup(t, 8)
		s.add(t, 0, 1, 0xff, 0)
		rdma.TMH(s.a.mem.Bytes()[0x1000:]).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, Tag: 1})
		mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: s.a.sge(0x1000, 20)}}))
		if wc := s.poll(s.a.scq, 1)[0]; wc.Status != rdma.WCRemInvReqErr {
			t.Fatalf("sender of a 20-byte RNDV: %+v", wc)
		}
		if s.r1.State() != rdma.QPStateErr {
			t.Fatalf("receiver in %v", s.r1.State())
		}
	})
}

func TestTMMalformedTMH(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"short", []byte{3, 0, 0, 0, 0, 0, 0, 0}},
		{"unknown opcode", append([]byte{9}, make([]byte, 15)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTMSetup(t, 8)
			s.postSRQ(t, 0, 1)
			copy(s.a.mem.Bytes()[0x1000:], tc.msg)
			mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: s.a.sge(0x1000, uint32(len(tc.msg)))}}))
			if wc := s.poll(s.a.scq, 1)[0]; wc.Status != rdma.WCRemInvReqErr {
				t.Fatalf("sender: %+v", wc)
			}
			if n := s.srq.Len(); n != 1 {
				t.Fatalf("malformed message used an SRQ WR (%d left)", n)
			}
		})
	}
}

func TestTMOpErrors(t *testing.T) {
	s := newTMSetup(t, 2)
	var busy []uint64
	s.srq.SetTMNotify(func(b uint64) { busy = append(busy, b) })
	for _, tc := range []struct {
		name string
		op   rdma.TMOp
		want rdma.WCStatus
	}{
		{"handle out of range", rdma.TMOp{Opcode: rdma.TMTagAdd, Handle: 2}, rdma.WCTMErr},
		{"delete unknown handle", rdma.TMOp{Opcode: rdma.TMTagDel, Handle: 1}, rdma.WCTMErr},
		{"delete handle out of range", rdma.TMOp{Opcode: rdma.TMTagDel, Handle: 1 << 31}, rdma.WCTMErr},
		{"too many SGEs", rdma.TMOp{Opcode: rdma.TMTagAdd, SGList: append(s.b.sge(0x100, 8), s.b.sge(0x200, 8)...)}, rdma.WCTMErr},
		{"bad lkey", rdma.TMOp{Opcode: rdma.TMTagAdd, SGList: []rdma.SGE{{Addr: 0x100, Length: 8, LKey: s.b.mr.LKey + 0x100}}}, rdma.WCLocProtErr},
		{"outside the MR", rdma.TMOp{Opcode: rdma.TMTagAdd, SGList: s.b.sge(1<<20-4, 8)}, rdma.WCLocProtErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.op.WRID = 44 // unsignaled: errors complete anyway
			wc := s.op(t, tc.op)
			wantWC(t, wc, 44, tc.want, rdma.WCTMAdd+rdma.WCOpcode(tc.op.Opcode))
		})
	}
	// List full: both handles taken, no third exists.
	s.add(t, 0, 1, 1, 0)
	s.add(t, 1, 1, 1, 0)
	wantWC(t, s.op(t, rdma.TMOp{WRID: 5, Opcode: rdma.TMTagAdd, Handle: 1}), 5, rdma.WCTMErr, rdma.WCTMAdd)
	// DEL frees a handle; a second DEL of it fails.
	wantWC(t, s.op(t, rdma.TMOp{WRID: 6, Opcode: rdma.TMTagDel, Flags: rdma.TMOpSignaled, Handle: 1}), 6, rdma.WCSuccess, rdma.WCTMDel)
	wantWC(t, s.op(t, rdma.TMOp{WRID: 7, Opcode: rdma.TMTagDel, Handle: 1}), 7, rdma.WCTMErr, rdma.WCTMDel)
	// The busy handles after each change: ADD 0, ADD 1, DEL 1.
	if len(busy) != 3 || busy[0] != 1 || busy[1] != 3 || busy[2] != 1 {
		t.Fatalf("busy handle sets %v, want [1 3 1]", busy)
	}
	if err := s.srq.PostOps([]rdma.TMOp{{Opcode: 3}}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("unknown opcode: %v", err)
	}
	plain, err := s.b.dev.CreateSRQ(s.b.pd, rdma.SRQInitAttr{MaxWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.PostOps([]rdma.TMOp{{Opcode: rdma.TMTagSync}}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("ops on a basic SRQ: %v", err)
	}
	for _, a := range []rdma.SRQInitAttr{
		{MaxWR: 4, TM: &rdma.TMAttr{MaxNumTags: 1, MaxOps: 1}},                                  // no CQ
		{MaxWR: 4, CQ: s.b.rcq, TM: &rdma.TMAttr{MaxNumTags: rdma.TMMaxNumTags + 1, MaxOps: 1}}, // too many tags
		{MaxWR: 4, CQ: s.b.rcq, TM: &rdma.TMAttr{MaxNumTags: 1, MaxOps: 0}},
	} {
		if _, err := s.b.dev.CreateSRQ(s.b.pd, a); !isErr(err, rdma.ErrInvalid) {
			t.Errorf("CreateSRQ %+v: %v", a.TM, err)
		}
	}
}

func TestParseTM(t *testing.T) {
	b := make([]byte, 40)
	for i := range b {
		b[i] = 0xff
	}
	rdma.TMH(b).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, AppCtx: 0x01020304, Tag: 0x1122334455667788})
	rdma.RVH(b[16:]).Encode(&rdma.RVHFields{VA: 0xa0a1a2a3a4a5a6a7, RKey: 0xbeef, Len: 77})
	want := []byte{1, 0, 0, 0, 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0, 0, 0xbe, 0xef, 0, 0, 0, 77}
	if !bytes.Equal(b[:32], want) {
		t.Fatalf("encoded % x", b[:32])
	}
	tmh, rvh, err := rdma.ParseTM(b)
	if err != nil || tmh.Tag() != 0x1122334455667788 || tmh.AppCtx() != 0x01020304 ||
		rvh.VA() != 0xa0a1a2a3a4a5a6a7 || rvh.RKey() != 0xbeef || rvh.Len() != 77 {
		t.Fatalf("parse: %v", err)
	}
	if _, _, err := rdma.ParseTM(b[:31]); err != rdma.ErrTMShort {
		t.Fatalf("RNDV without a whole RVH: %v", err)
	}
	b[0] = rdma.TMHEager
	if _, rvh, err := rdma.ParseTM(b[:16]); err != nil || rvh != nil {
		t.Fatalf("eager: %v %v", rvh, err)
	}
	// Reserved bytes are ignored, as ConnectX does: rdma-core's test
	// writes only the opcode and the tag over its payload.
	b[1], b[2], b[3] = 'c', 'c', 'c'
	if tmh, _, err := rdma.ParseTM(b[:16]); err != nil || tmh.Tag() != 0x1122334455667788 {
		t.Fatalf("eager with reserved bytes set: %v", err)
	}
}

// FuzzTMRecv sends arbitrary messages to a QP on a TM SRQ that holds one
// tagged buffer and ordinary WRs. Properties: no panic; the sender's
// SEND fails with a remote invalid request exactly when ParseTM rejects
// the message; what ParseTM accepts re-encodes to the same bytes.
func FuzzTMRecv(f *testing.F) {
	rndv := make([]byte, 32)
	rdma.TMH(rndv).Encode(&rdma.TMHFields{Opcode: rdma.TMHRndv, Tag: 1})
	rdma.RVH(rndv[16:]).Encode(&rdma.RVHFields{VA: 0x4000, Len: 64})
	eager := make([]byte, 100)
	rdma.TMH(eager).Encode(&rdma.TMHFields{Opcode: rdma.TMHEager, Tag: 1, AppCtx: 3})
	for _, seed := range [][]byte{
		rndv, eager, eager[:16], eager[:15], {rdma.TMHNoTag}, make([]byte, 16),
		append([]byte{rdma.TMHFin}, make([]byte, 15)...), append([]byte{7}, make([]byte, 31)...),
		rndv[:31],
	} {
		f.Add(seed, uint64(0xff))
	}
	f.Fuzz(func(t *testing.T, msg []byte, mask uint64) {
		if len(msg) == 0 || len(msg) > 1024 { // the WRs and the tagged buffer hold 1 KiB
			return
		}
		tmh, rvh, perr := rdma.ParseTM(msg)
		if perr == nil {
			b := make([]byte, rdma.TMHeaderLen+rdma.TMRndvHeadLen)
			rdma.TMH(b).Encode(&rdma.TMHFields{Opcode: tmh.Opcode(), AppCtx: tmh.AppCtx(), Tag: tmh.Tag()})
			n := rdma.TMHeaderLen
			if rvh != nil {
				rdma.RVH(b[16:]).Encode(&rdma.RVHFields{VA: rvh.VA(), RKey: rvh.RKey(), Len: rvh.Len()})
				n += rdma.TMRndvHeadLen
			}
			want := append([]byte(nil), msg[:n]...)
			want[1], want[2], want[3] = 0, 0, 0 // reserved: ignored, encoded as zero
			if !bytes.Equal(b[:n], want) {
				t.Fatalf("re-encoded % x, parsed % x", b[:n], msg[:n])
			}
		}
		s := newTMSetup(t, 4)
		s.postSRQ(t, 0, 2)
		mustPost(t, s.s1.PostRecv([]rdma.RecvWR{{WRID: 77, SGList: s.a.sge(0x9000, 64)}}))
		s.add(t, 0, 1, mask, 0)
		copy(s.a.mem.Bytes()[0x1000:], msg)
		mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: s.a.sge(0x1000, uint32(len(msg)))}}))
		wc := s.poll(s.a.scq, 1)[0]
		if (wc.Status == rdma.WCRemInvReqErr) != (perr != nil) {
			t.Fatalf("parse error %v, sender completion %+v", perr, wc)
		}
		s.settle()
	})
}
