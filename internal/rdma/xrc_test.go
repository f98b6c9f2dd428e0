package rdma_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/testutil"
)

// xrcSetup is an XRC initiator on a connected to an XRC target on b; b's
// XRC domain holds two XRC SRQs with their own CQs (in b's PD, whose MR
// covers b's memory).
type xrcSetup struct {
	*pair
	ia, ib   *interceptPort
	xrcd     *rdma.XRCD
	srq1     *rdma.SRQ
	srq2     *rdma.SRQ
	cq1, cq2 *rdma.CQ
	ini, tgt *rdma.QP
}

func newXRCSetup(t *testing.T, o pairOpts) *xrcSetup {
	t.Helper()
	o.qpAccess = rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic
	o.mrAccess = o.qpAccess
	p, ia, ib := newInterceptPair(t, o)
	s := &xrcSetup{pair: p, ia: ia, ib: ib}
	d := p.b.dev
	var err error
	if s.xrcd, err = d.AllocXRCD(); err != nil {
		t.Fatal(err)
	}
	mkSRQ := func() (*rdma.SRQ, *rdma.CQ) {
		cq, err := d.CreateCQ(64, nil)
		if err != nil {
			t.Fatal(err)
		}
		srq, err := d.CreateSRQ(p.b.pd, rdma.SRQInitAttr{MaxWR: 16, MaxSGE: 2, XRCD: s.xrcd, CQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		return srq, cq
	}
	s.srq1, s.cq1 = mkSRQ()
	s.srq2, s.cq2 = mkSRQ()
	if s.ini, err = p.a.dev.CreateQP(p.a.pd, rdma.QPInitAttr{SendCQ: p.a.scq, QPType: rdma.QPTypeXRCIni,
		Cap: rdma.QPCap{MaxSendWR: 32, MaxSendSGE: 2}}); err != nil {
		t.Fatal(err)
	}
	if s.tgt, err = d.CreateQP(nil, rdma.QPInitAttr{QPType: rdma.QPTypeXRCTgt, XRCD: s.xrcd}); err != nil {
		t.Fatal(err)
	}
	p.connect(s.ini, s.tgt, p.b)
	p.connect(s.tgt, s.ini, p.a)
	return s
}

func (s *xrcSetup) post(t *testing.T, wr rdma.SendWR) rdma.WC {
	t.Helper()
	wr.SendFlags |= rdma.SendSignaled
	mustPost(t, s.ini.PostSend([]rdma.SendWR{wr}))
	return s.poll(s.a.scq, 1)[0]
}

// TestXRCSendToTwoSRQs sends through one initiator/target pair to two XRC
// SRQs: each message lands in the SRQ its XRCETH names and completes on
// that SRQ's CQ, multi-packet messages included.
func TestXRCSendToTwoSRQs(t *testing.T) {
	s := newXRCSetup(t, pairOpts{mtu: 1024})
	if s.srq1.Num() == 0 || s.srq1.Num() == s.srq2.Num() {
		t.Fatalf("SRQ numbers %#x %#x", s.srq1.Num(), s.srq2.Num())
	}
	amem, bmem := s.a.mem.Bytes(), s.b.mem.Bytes()
	fill(amem[0x1000:0x1000+3000], 7)
	fill(amem[0x3000:0x3000+100], 9)
	mustPost(t, s.srq1.PostRecv([]rdma.RecvWR{{WRID: 11, SGList: s.b.sge(0x10000, 4096)}}))
	mustPost(t, s.srq2.PostRecv([]rdma.RecvWR{{WRID: 22, SGList: s.b.sge(0x20000, 4096)}}))

	wc := s.post(t, rdma.SendWR{WRID: 1, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 3000), RemoteSRQN: s.srq2.Num()})
	wantWC(t, wc, 1, rdma.WCSuccess, rdma.WCSend)
	wc = s.post(t, rdma.SendWR{WRID: 2, Opcode: rdma.WRSendWithImm, ImmData: 0xfeed, SGList: s.a.sge(0x3000, 100),
		RemoteSRQN: s.srq1.Num()})
	wantWC(t, wc, 2, rdma.WCSuccess, rdma.WCSend)

	r2 := s.poll(s.cq2, 1)[0]
	wantWC(t, r2, 22, rdma.WCSuccess, rdma.WCRecv)
	if r2.ByteLen != 3000 || r2.QPNum != s.tgt.QPN() || !bytes.Equal(bmem[0x20000:0x20000+3000], amem[0x1000:0x1000+3000]) {
		t.Fatalf("SRQ 2 completion %+v or data wrong", r2)
	}
	r1 := s.poll(s.cq1, 1)[0]
	wantWC(t, r1, 11, rdma.WCSuccess, rdma.WCRecv)
	if r1.ByteLen != 100 || r1.ImmData != 0xfeed || r1.WCFlags&rdma.WCWithImm == 0 ||
		!bytes.Equal(bmem[0x10000:0x10000+100], amem[0x3000:0x3000+100]) {
		t.Fatalf("SRQ 1 completion %+v or data wrong", r1)
	}
	s.expectNone(s.b.rcq, "the pair's own receive CQ")
	if s.tgt.State() != rdma.QPStateRTS {
		t.Fatalf("target QP in %v", s.tgt.State())
	}
}

// TestXRCWriteReadAtomic runs RDMA WRITE, READ and both atomics through an
// XRC target: the R_Keys are checked in the PD of the SRQ the XRCETH
// names.
func TestXRCWriteReadAtomic(t *testing.T) {
	s := newXRCSetup(t, pairOpts{mtu: 1024})
	amem, bmem := s.a.mem.Bytes(), s.b.mem.Bytes()
	n := s.srq1.Num()
	fill(amem[0x1000:0x1000+2500], 3)
	wc := s.post(t, rdma.SendWR{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: s.a.sge(0x1000, 2500),
		RemoteAddr: 0x30000, RKey: s.b.mr.RKey, RemoteSRQN: n})
	wantWC(t, wc, 1, rdma.WCSuccess, rdma.WCRDMAWrite)
	if !bytes.Equal(bmem[0x30000:0x30000+2500], amem[0x1000:0x1000+2500]) {
		t.Fatal("WRITE data differ")
	}
	fill(bmem[0x40000:0x40000+3000], 5)
	wc = s.post(t, rdma.SendWR{WRID: 2, Opcode: rdma.WRRDMARead, SGList: s.a.sge(0x5000, 3000),
		RemoteAddr: 0x40000, RKey: s.b.mr.RKey, RemoteSRQN: n})
	wantWC(t, wc, 2, rdma.WCSuccess, rdma.WCRDMARead)
	if !bytes.Equal(amem[0x5000:0x5000+3000], bmem[0x40000:0x40000+3000]) {
		t.Fatal("READ data differ")
	}
	binary.LittleEndian.PutUint64(bmem[0x50000:], 40)
	wc = s.post(t, rdma.SendWR{WRID: 3, Opcode: rdma.WRAtomicFetchAndAdd, SGList: s.a.sge(0x6000, 8),
		RemoteAddr: 0x50000, RKey: s.b.mr.RKey, CompareAdd: 2, RemoteSRQN: n})
	wantWC(t, wc, 3, rdma.WCSuccess, rdma.WCFetchAdd)
	wc = s.post(t, rdma.SendWR{WRID: 4, Opcode: rdma.WRAtomicCmpAndSwp, SGList: s.a.sge(0x6008, 8),
		RemoteAddr: 0x50000, RKey: s.b.mr.RKey, CompareAdd: 42, Swap: 7, RemoteSRQN: n})
	wantWC(t, wc, 4, rdma.WCSuccess, rdma.WCCompSwap)
	if got := binary.LittleEndian.Uint64(bmem[0x50000:]); got != 7 {
		t.Fatalf("target word %d, want 7", got)
	}
	if a, b := binary.LittleEndian.Uint64(amem[0x6000:]), binary.LittleEndian.Uint64(amem[0x6008:]); a != 40 || b != 42 {
		t.Fatalf("atomic originals %d %d, want 40 42", a, b)
	}
	s.expectNone(s.cq1, "SRQ CQ after WRITE/READ/atomics")
}

// TestXRCWireFormat checks the frames both sides send: XRC opcodes, an
// XRCETH naming the SRQ on every request packet, none on responses.
func TestXRCWireFormat(t *testing.T) {
	s := newXRCSetup(t, pairOpts{mtu: 1024})
	s.ia.keep, s.ib.keep = true, true
	mustPost(t, s.srq2.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: s.b.sge(0x10000, 4096)}}))
	s.post(t, rdma.SendWR{WRID: 1, Opcode: rdma.WRSendWithImm, SGList: s.a.sge(0x1000, 2100), RemoteSRQN: s.srq2.Num()})
	s.post(t, rdma.SendWR{WRID: 2, Opcode: rdma.WRRDMARead, SGList: s.a.sge(0x1000, 1500), RemoteAddr: 0x2000,
		RKey: s.b.mr.RKey, RemoteSRQN: s.srq2.Num()})
	var reqs, resps []proto.Opcode
	for _, f := range s.ia.captured() {
		p, err := proto.Parse(f, proto.LinkEthernet)
		if err != nil || !p.ICRCValid() {
			t.Fatalf("initiator frame: %v", err)
		}
		reqs = append(reqs, p.Opcode())
		if p.XRCETH == nil || p.XRCETH.XRCSRQ() != s.srq2.Num() || p.BTH.DestQP() != s.tgt.QPN() {
			t.Errorf("%v: XRCETH %x DestQP %#x", p.Opcode(), []byte(p.XRCETH), p.BTH.DestQP())
		}
	}
	for _, f := range s.ib.captured() {
		p, err := proto.Parse(f, proto.LinkEthernet)
		if err != nil || !p.ICRCValid() {
			t.Fatalf("target frame: %v", err)
		}
		resps = append(resps, p.Opcode())
		if p.XRCETH != nil || p.BTH.DestQP() != s.ini.QPN() {
			t.Errorf("%v: response carries XRCETH %x or goes to %#x", p.Opcode(), []byte(p.XRCETH), p.BTH.DestQP())
		}
	}
	wantReq := []proto.Opcode{proto.OpXRCSendFirst, proto.OpXRCSendMiddle, proto.OpXRCSendLastImm, proto.OpXRCReadRequest}
	if !equalOps(reqs, wantReq) {
		t.Errorf("initiator sent %v, want %v", reqs, wantReq)
	}
	wantResp := []proto.Opcode{proto.OpXRCAcknowledge, proto.OpXRCReadResponseFirst, proto.OpXRCReadResponseLast}
	if !equalOps(resps, wantResp) {
		t.Errorf("target sent %v, want %v", resps, wantResp)
	}
}

func equalOps(a, b []proto.Opcode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestXRCBadSRQ sends to SRQ numbers the target must refuse: none with
// that number, one of another XRC domain, and (mid-message) another SRQ
// than the SEND began on. Each is NAKed Invalid Request: the initiator's
// WR completes with RemInvReqErr and the target QP goes to ERR.
func TestXRCBadSRQ(t *testing.T) {
	for _, tc := range []struct {
		name string
		srqn func(s *xrcSetup) uint32
	}{
		{"no such SRQ", func(s *xrcSetup) uint32 { return s.srq2.Num() + 100 }},
		{"other domain", func(s *xrcSetup) uint32 {
			x, err := s.b.dev.AllocXRCD()
			if err != nil {
				t.Fatal(err)
			}
			srq, err := s.b.dev.CreateSRQ(s.b.pd, rdma.SRQInitAttr{MaxWR: 4, XRCD: x, CQ: s.cq1})
			if err != nil {
				t.Fatal(err)
			}
			mustPost(t, srq.PostRecv([]rdma.RecvWR{{WRID: 5, SGList: s.b.sge(0x10000, 64)}}))
			return srq.Num()
		}},
		{"destroyed SRQ", func(s *xrcSetup) uint32 {
			n := s.srq2.Num()
			if err := s.srq2.Destroy(); err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"not an XRC SRQ", func(s *xrcSetup) uint32 {
			srq, err := s.b.dev.CreateSRQ(s.b.pd, rdma.SRQInitAttr{MaxWR: 4})
			if err != nil {
				t.Fatal(err)
			}
			return srq.Handle()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newXRCSetup(t, pairOpts{})
			n := tc.srqn(s)
			wc := s.post(t, rdma.SendWR{WRID: 9, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 64), RemoteSRQN: n})
			wantWC(t, wc, 9, rdma.WCRemInvReqErr, rdma.WCSend)
			if got := s.b.dev.Counters().XRCBadSRQ; got != 1 {
				t.Errorf("XRCBadSRQ = %d, want 1", got)
			}
			if s.tgt.State() != rdma.QPStateErr {
				t.Errorf("target QP in %v, want ERR", s.tgt.State())
			}
			s.expectNone(s.cq1, "SRQ CQ")
		})
	}
	t.Run("SRQ changes mid-SEND", func(t *testing.T) {
		s := newXRCSetup(t, pairOpts{mtu: 1024})
		mustPost(t, s.srq1.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: s.b.sge(0x10000, 4096)}}))
		// Rewrite the XRCETH of the SEND's second packet (and fix the
		// ICRC) to name SRQ 2.
		s.ia.mu.Lock()
		s.ia.mutate = func(frame []byte) {
			p, err := proto.Parse(frame, proto.LinkEthernet)
			if err != nil || p.Opcode() != proto.OpXRCSendLast {
				return
			}
			p.XRCETH.Encode(s.srq2.Num())
			proto.PutICRC(p.ICRC, p.ComputeICRC())
		}
		s.ia.mu.Unlock()
		mustPost(t, s.srq2.PostRecv([]rdma.RecvWR{{WRID: 2, SGList: s.b.sge(0x20000, 4096)}}))
		wc := s.post(t, rdma.SendWR{WRID: 9, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 1500), RemoteSRQN: s.srq1.Num()})
		wantWC(t, wc, 9, rdma.WCRemInvReqErr, rdma.WCSend)
		// The WR the message had taken from SRQ 1 completes in error
		// there; SRQ 2's is untouched.
		wantWC(t, s.poll(s.cq1, 1)[0], 1, rdma.WCRemInvReqErr, rdma.WCRecv)
		s.expectNone(s.cq2, "SRQ 2")
		if s.srq2.Len() != 1 {
			t.Errorf("SRQ 2 holds %d WRs, want 1", s.srq2.Len())
		}
	})
}

// TestXRCRKeyOfAnotherPD writes with the R_Key of an MR outside the PD of
// the named SRQ: a remote access error, although the MR is on the same
// device.
func TestXRCRKeyOfAnotherPD(t *testing.T) {
	s := newXRCSetup(t, pairOpts{})
	pd2, err := s.b.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr2, err := s.b.dev.RegMR(pd2, 0x80000, 0x1000, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	wc := s.post(t, rdma.SendWR{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: s.a.sge(0x1000, 64),
		RemoteAddr: 0x80000, RKey: mr2.RKey, RemoteSRQN: s.srq1.Num()})
	wantWC(t, wc, 1, rdma.WCRemAccessErr, rdma.WCRDMAWrite)
}

// TestXRCObjects checks the control-path rules: what each XRC QP type
// takes and refuses, domain and SRQ lifetimes, and that an RC QP ignores
// XRC packets.
func TestXRCObjects(t *testing.T) {
	s := newXRCSetup(t, pairOpts{})
	d := s.b.dev
	if err := s.tgt.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend}}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("PostSend on a target QP: %v", err)
	}
	if err := s.tgt.PostRecv([]rdma.RecvWR{{}}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("PostRecv on a target QP: %v", err)
	}
	if err := s.ini.PostRecv([]rdma.RecvWR{{}}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("PostRecv on an initiator QP: %v", err)
	}
	if _, err := d.CreateQP(nil, rdma.QPInitAttr{QPType: rdma.QPTypeXRCTgt}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("target QP without XRCD: %v", err)
	}
	if _, err := d.CreateQP(nil, rdma.QPInitAttr{QPType: rdma.QPTypeXRCTgt, XRCD: s.xrcd, SendCQ: s.cq1}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("target QP with a CQ: %v", err)
	}
	if _, err := d.CreateQP(s.b.pd, rdma.QPInitAttr{QPType: rdma.QPTypeXRCIni}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("initiator QP without send CQ: %v", err)
	}
	if _, err := d.CreateSRQ(s.b.pd, rdma.SRQInitAttr{MaxWR: 4, XRCD: s.xrcd}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("XRC SRQ without CQ: %v", err)
	}
	if err := s.xrcd.Dealloc(); !isErr(err, rdma.ErrBusy) {
		t.Errorf("Dealloc of a used XRCD: %v", err)
	}
	if err := s.tgt.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, srq := range []*rdma.SRQ{s.srq1, s.srq2} {
		if err := srq.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.xrcd.Dealloc(); err != nil {
		t.Errorf("Dealloc of an empty XRCD: %v", err)
	}
	if _, err := d.CreateSRQ(s.b.pd, rdma.SRQInitAttr{MaxWR: 4, XRCD: s.xrcd, CQ: s.cq1}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("XRC SRQ in a freed XRCD: %v", err)
	}
	if a := d.QueryDevice(); a.DeviceCapFlags&rdma.DeviceXRC == 0 {
		t.Error("device does not report XRC")
	}
}

// TestXRCToRCQP sends XRC requests to an RC QP: it drops them (they are
// counted unsupported), and the initiator runs out of retries.
func TestXRCToRCQP(t *testing.T) {
	s := newXRCSetup(t, pairOpts{retry: 1, timeout: 10})
	ini2, err := s.a.dev.CreateQP(s.a.pd, rdma.QPInitAttr{SendCQ: s.a.scq, QPType: rdma.QPTypeXRCIni,
		Cap: rdma.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s.connect(ini2, s.qb, s.b)
	before := s.b.dev.Counters().RxUnsupported
	mustPost(t, ini2.PostSend([]rdma.SendWR{{WRID: 5, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: s.a.sge(0x1000, 8), RemoteSRQN: s.srq1.Num()}}))
	wantWC(t, s.poll(s.a.scq, 1)[0], 5, rdma.WCRetryExcErr, rdma.WCSend)
	if s.b.dev.Counters().RxUnsupported <= before {
		t.Error("RC QP did not count the XRC packets as unsupported")
	}
}

// TestXRCSessionInTshark has tshark read a whole XRC session (SEND,
// WRITE, READ, both atomics, their ACKs and responses, and a NAK Invalid
// Request for a bad SRQ number): no malformed frame, and tshark's opcode,
// destination QP and PSN match ours. Wireshark 4.0 does not dissect the
// XRCETH; the bytes it reports after the BTH must start with it (requests)
// or with the AETH (ACKs and the first and last READ response).
func TestXRCSessionInTshark(t *testing.T) {
	tshark := testutil.Tshark(t)
	s := newXRCSetup(t, pairOpts{mtu: 1024})
	s.ia.keep, s.ib.keep = true, true
	n := s.srq1.Num()
	mustPost(t, s.srq1.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: s.b.sge(0x10000, 4096)}}))
	for _, wr := range []rdma.SendWR{
		{Opcode: rdma.WRSendWithImm, ImmData: 5, SGList: s.a.sge(0x1000, 1500)},
		{Opcode: rdma.WRRDMAWrite, SGList: s.a.sge(0x1000, 100), RemoteAddr: 0x20000, RKey: s.b.mr.RKey},
		{Opcode: rdma.WRRDMARead, SGList: s.a.sge(0x3000, 2500), RemoteAddr: 0x20000, RKey: s.b.mr.RKey},
		{Opcode: rdma.WRAtomicFetchAndAdd, SGList: s.a.sge(0x6000, 8), RemoteAddr: 0x30000, RKey: s.b.mr.RKey, CompareAdd: 1},
		{Opcode: rdma.WRAtomicCmpAndSwp, SGList: s.a.sge(0x6000, 8), RemoteAddr: 0x30000, RKey: s.b.mr.RKey, CompareAdd: 1, Swap: 2},
	} {
		wr.RemoteSRQN = n
		if wc := s.post(t, wr); wc.Status != rdma.WCSuccess {
			t.Fatalf("%v: %v", wr.Opcode, wc.Status)
		}
	}
	wc := s.post(t, rdma.SendWR{WRID: 7, Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 8), RemoteSRQN: n + 50})
	wantWC(t, wc, 7, rdma.WCRemInvReqErr, rdma.WCSend)

	var frames [][]byte
	var want []string
	for _, f := range append(s.ia.captured(), s.ib.captured()...) {
		p, err := proto.Parse(f, proto.LinkEthernet)
		if err != nil {
			t.Fatal(err)
		}
		bth := cap(f) - cap(p.BTH)
		after := f[bth+proto.BTHSize:]
		prefix := hex.EncodeToString(after[:4]) // XRCETH, or AETH
		if p.XRCETH == nil && p.AETH == nil {
			prefix = "" // READ RESPONSE MIDDLE: payload only
		}
		frames = append(frames, f)
		want = append(want, fmt.Sprintf("%d\t0x%06x\t%d\t%s", p.Opcode(), p.BTH.DestQP(), p.BTH.PSN(), prefix))
	}
	path := filepath.Join(t.TempDir(), "xrc.pcap")
	testutil.WritePcap(t, path, testutil.LinkTypeEthernet, frames)
	run := func(args ...string) string {
		args = append(append(append([]string{}, testutil.TsharkArgs...), "-r", path), args...)
		out, err := exec.Command(tshark, args...).Output()
		if err != nil {
			t.Fatalf("tshark %v: %v", args, err)
		}
		return string(out)
	}
	if v := run("-V"); strings.Contains(v, "Malformed") {
		t.Fatal("tshark reports a malformed frame")
	}
	rows := strings.Split(strings.TrimSpace(run("-T", "fields", "-e", "infiniband.bth.opcode",
		"-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn", "-e", "infiniband.vendor")), "\n")
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	sawNAK := false
	for i, row := range rows {
		col := strings.Split(row, "\t")
		w := strings.Split(want[i], "\t")
		if len(col) < 4 || col[0] != w[0] || col[1] != w[1] || col[2] != w[2] || !strings.HasPrefix(col[3], w[3]) {
			t.Errorf("frame %d: tshark %q, want %q (prefix)", i+1, row, want[i])
		}
		if w[0] == fmt.Sprint(uint8(proto.OpXRCAcknowledge)) && strings.HasPrefix(w[3], "61") {
			sawNAK = true // syndrome 0x61: NAK Invalid Request
		}
	}
	if !sawNAK {
		t.Error("no NAK Invalid Request in the session")
	}
}
