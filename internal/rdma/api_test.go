package rdma_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestRegMRPages moves data between page-list MRs whose pages are scattered
// (and reversed) in the DMA space, with an IOVA that starts mid-page.
func TestRegMRPages(t *testing.T) {
	p := newPair(t, pairOpts{memSize: 1 << 20, mtu: 1024})
	const page = 4096
	const iova = 0x7f00_0000_0123 // starts 0x123 into its first page
	const length = 5*page - 0x123 - 7
	var pagesA, pagesB []uint64
	for i := range 5 {
		pagesA = append(pagesA, uint64(0x80000+(4-i)*2*page)) // reversed, with holes
		pagesB = append(pagesB, uint64(0x40000+i*3*page))
	}
	mrA, err := p.a.dev.RegMRPages(p.a.pd, iova, length, page, pagesA, rdma.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	mrB, err := p.b.dev.RegMRPages(p.b.pd, iova, length, page, pagesB,
		rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	// The logical buffer behind mrA, filled through the page list.
	want := make([]byte, length)
	fill(want, 42)
	scatterPages := func(mem []byte, pages []uint64, data []byte) {
		off := uint64(0x123)
		for len(data) > 0 {
			pg := pages[off/page]
			n := copy(mem[pg+off%page:pg+page], data)
			data, off = data[n:], off+uint64(n)
		}
	}
	gatherPages := func(mem []byte, pages []uint64) []byte {
		out := make([]byte, 0, length)
		off := uint64(0x123)
		for len(out) < length {
			pg := pages[off/page]
			n := min(uint64(length-len(out)), page-off%page)
			out = append(out, mem[pg+off%page:pg+off%page+n]...)
			off += n
		}
		return out
	}
	scatterPages(p.a.mem.Bytes(), pagesA, want)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: []rdma.SGE{{Addr: iova, Length: length, LKey: mrA.LKey}}, RemoteAddr: iova, RKey: mrB.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
	if !bytes.Equal(gatherPages(p.b.mem.Bytes(), pagesB), want) {
		t.Fatal("WRITE through page lists: data mismatch")
	}
	// READ it back into a third buffer of A through the page-list MR.
	clear(p.a.mem.Bytes()[0x80000:])
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
		SGList: []rdma.SGE{{Addr: iova + 100, Length: length - 200, LKey: mrA.LKey}}, RemoteAddr: iova + 100, RKey: mrB.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMARead)
	got := gatherPages(p.a.mem.Bytes(), pagesA)
	if !bytes.Equal(got[100:length-100], want[100:length-100]) {
		t.Fatal("READ through page lists: data mismatch")
	}
	for _, c := range []struct {
		name  string
		pages []uint64
		ps    uint64
	}{
		{"too few pages", pagesA[:4], page},
		{"page size not a power of two", pagesA, 5000},
		{"unaligned page", []uint64{1, 2, 3, 4, 5}, page},
		{"page outside memory", []uint64{0, 0, 0, 0, 1 << 30}, page},
	} {
		if _, err := p.a.dev.RegMRPages(p.a.pd, iova, length, c.ps, c.pages, rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
}

func TestMRAndPDLifecycle(t *testing.T) {
	p := newPair(t, pairOpts{})
	d := p.a.dev
	for _, c := range []struct {
		name   string
		addr   uint64
		length uint64
		access rdma.Access
	}{
		{"remote write without local write", 0, 4096, rdma.AccessRemoteWrite},
		{"remote atomic without local write", 0, 4096, rdma.AccessRemoteAtomic},
		{"unknown access bit", 0, 4096, rdma.AccessLocalWrite | 1<<30},
		{"outside memory", uint64(p.o.memSize) - 10, 4096, rdma.AccessLocalWrite},
		{"wraps", 1 << 63, 1 << 63, rdma.AccessLocalWrite},
	} {
		if _, err := d.RegMR(p.a.pd, c.addr, c.length, c.access); !errors.Is(err, rdma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	pd2, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := d.RegMR(pd2, 0, 4096, rdma.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd2.Dealloc(); !errors.Is(err, rdma.ErrBusy) {
		t.Fatalf("dealloc PD with an MR: %v", err)
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Dereg(); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("second dereg: %v", err)
	}
	if err := pd2.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegMR(pd2, 0, 4096, rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("reg MR on a deallocated PD: %v", err)
	}
	if err := p.a.scq.Destroy(); !errors.Is(err, rdma.ErrBusy) {
		t.Fatalf("destroy CQ in use: %v", err)
	}
	// A deregistered remote MR is a remote access error; the reused key
	// slot gets a new key, so the old rkey stays invalid.
	mrB, _ := p.b.dev.RegMR(p.b.pd, 0, 4096, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	old := mrB.RKey
	mrB.Dereg()
	mrB2, _ := p.b.dev.RegMR(p.b.pd, 0, 4096, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	if mrB2.RKey == old {
		t.Fatalf("key %#x reused", old)
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), RKey: old}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRemAccessErr, rdma.WCRDMAWrite)
	// Destroying the QPs releases the CQs and the PD.
	if err := p.qa.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := p.qa.Destroy(); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("second destroy: %v", err)
	}
	if err := p.a.scq.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestPostValidation(t *testing.T) {
	p := newPair(t, pairOpts{sendWR: 4, recvWR: 2, sge: 2, inline: 64})
	sg := p.a.sge(0, 8)
	cases := []struct {
		name string
		wrs  []rdma.SendWR
		idx  int
		err  error
	}{
		{"atomic into 4 bytes", []rdma.SendWR{{Opcode: rdma.WRAtomicFetchAndAdd, SGList: p.a.sge(0, 4)}}, 0, rdma.ErrInvalid},
		{"misaligned atomic", []rdma.SendWR{{Opcode: rdma.WRAtomicCmpAndSwp, SGList: sg, RemoteAddr: 12}}, 0, rdma.ErrInvalid},
		{"inline atomic", []rdma.SendWR{{Opcode: rdma.WRAtomicFetchAndAdd, SendFlags: rdma.SendInline, SGList: sg}}, 0, rdma.ErrInvalid},
		{"bad opcode", []rdma.SendWR{{Opcode: 99}}, 0, rdma.ErrInvalid},
		{"too many SGEs", []rdma.SendWR{{Opcode: rdma.WRSend, SGList: make([]rdma.SGE, 3)}}, 0, rdma.ErrInvalid},
		{"inline too long", []rdma.SendWR{{Opcode: rdma.WRSend, SendFlags: rdma.SendInline, SGList: p.a.sge(0, 65)}}, 0, rdma.ErrInvalid},
		{"inline READ", []rdma.SendWR{{Opcode: rdma.WRRDMARead, SendFlags: rdma.SendInline, SGList: sg}}, 0, rdma.ErrInvalid},
		{"inline outside memory", []rdma.SendWR{{Opcode: rdma.WRSend, SendFlags: rdma.SendInline,
			SGList: []rdma.SGE{{Addr: 1 << 40, Length: 8}}}}, 0, rdma.ErrInvalid},
		{"message too long", []rdma.SendWR{{Opcode: rdma.WRSend, SGList: []rdma.SGE{{Length: 1 << 31}, {Length: 1}}}}, 0, rdma.ErrInvalid},
		{"second WR bad", []rdma.SendWR{{Opcode: rdma.WRSend, SGList: sg}, {Opcode: 99}}, 1, rdma.ErrInvalid},
	}
	a := rdma.QPAttr{QPState: rdma.QPStateSQD} // keep the posted WRs in the queue
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := p.qa.PostSend(c.wrs)
			var pe *rdma.PostError
			if !errors.As(err, &pe) || pe.Index != c.idx || !errors.Is(err, c.err) {
				t.Fatalf("error %v, want PostError index %d wrapping %v", err, c.idx, c.err)
			}
		})
	}
	// One WR of "second WR bad" was posted; three more fill the queue.
	err := p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: sg}, {Opcode: rdma.WRSend}, {Opcode: rdma.WRSend}, {Opcode: rdma.WRSend}})
	var pe *rdma.PostError
	if !errors.As(err, &pe) || pe.Index != 3 || !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("queue full: %v", err)
	}
	err = p.qa.PostRecv([]rdma.RecvWR{{}, {}, {}})
	if !errors.As(err, &pe) || pe.Index != 2 || !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("receive queue full: %v", err)
	}
	if err := p.qa.PostRecv([]rdma.RecvWR{{SGList: make([]rdma.SGE, 3)}}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("too many receive SGEs: %v", err)
	}
	// States that refuse sends.
	qp := p.a.createQP(t, &p.o)
	if err := qp.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend}}); !errors.Is(err, rdma.ErrInvalidState) {
		t.Fatalf("post send in RESET: %v", err)
	}
	a = rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1}
	if err := qp.Modify(&a, mInit); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend}}); !errors.Is(err, rdma.ErrInvalidState) {
		t.Fatalf("post send in INIT: %v", err)
	}
	if err := qp.PostRecv([]rdma.RecvWR{{}}); err != nil {
		t.Fatalf("post recv in INIT: %v", err)
	}
}

func TestCreateLimits(t *testing.T) {
	mem := rdma.NewHostMemory(1 << 16)
	d, err := rdma.NewDevice(rdma.DeviceConfig{MAC: [6]byte{2, 0, 0, 0, 0, 9}, Memory: mem, MaxQP: 2, MaxCQ: 1, MaxMR: 1, MaxPD: 1, MaxQPWR: 8, MaxCQE: 16}, &interceptPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pd, _ := d.AllocPD()
	if _, err := d.AllocPD(); !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("second PD: %v", err)
	}
	if _, err := d.RegMR(pd, 0, 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegMR(pd, 0, 10, 0); !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("second MR: %v", err)
	}
	if _, err := d.CreateCQ(17, nil); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("CQ too big: %v", err)
	}
	cq, _ := d.CreateCQ(16, nil)
	if _, err := d.CreateCQ(1, nil); !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("second CQ: %v", err)
	}
	attr := rdma.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPType: rdma.QPTypeRC, Cap: rdma.QPCap{MaxSendWR: 8, MaxRecvWR: 8}}
	if _, err := d.CreateQP(pd, rdma.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPType: rdma.QPType(7)}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("QP of an unknown type: %v", err)
	}
	bad := attr
	bad.Cap.MaxSendWR = 9
	if _, err := d.CreateQP(pd, bad); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("MaxSendWR too big: %v", err)
	}
	q1, err := d.CreateQP(pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	q2, _ := d.CreateQP(pd, attr)
	if q1.QPN() == q2.QPN() || q1.QPN() < 0x11 {
		t.Fatalf("QPNs %#x %#x", q1.QPN(), q2.QPN())
	}
	if _, err := d.CreateQP(pd, attr); !errors.Is(err, rdma.ErrNoResources) {
		t.Fatalf("third QP: %v", err)
	}
}

func TestCompChannel(t *testing.T) {
	p := newPair(t, pairOpts{})
	ch := p.b.dev.NewCompChannel()
	cq, err := p.b.dev.CreateCQ(16, ch)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := p.b.dev.CreateQP(p.b.pd, rdma.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPType: rdma.QPTypeRC,
		Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Reconnect qa to the new QP.
	a := rdma.QPAttr{QPState: rdma.QPStateReset}
	p.qa.Modify(&a, rdma.QPAttrState)
	p.qb = qp
	p.connect(p.qa, qp, p.b)
	p.connect(qp, p.qa, p.a)
	event := func() *rdma.CQ {
		select {
		case c := <-ch.Events():
			return c
		default:
			return nil
		}
	}
	send := func(wrid uint64, flags rdma.SendFlags) {
		mustPost(t, qp.PostRecv([]rdma.RecvWR{{WRID: wrid, SGList: p.b.sge(0, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: wrid, Opcode: rdma.WRSend, SendFlags: flags, SGList: p.a.sge(0, 8)}}))
		p.settle()
	}
	send(1, 0) // not armed: no event
	if c := event(); c != nil {
		t.Fatal("event without ReqNotify")
	}
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	send(2, 0)
	if c := event(); c != cq {
		t.Fatalf("armed CQ: event %v", c)
	}
	send(3, 0) // disarmed by the event
	if c := event(); c != nil {
		t.Fatal("second event without re-arming")
	}
	cq.ReqNotify(true)
	send(4, 0) // not solicited
	if c := event(); c != nil {
		t.Fatal("solicited-only CQ woke for an unsolicited receive")
	}
	send(5, rdma.SendSolicited)
	if c := event(); c != cq {
		t.Fatal("no event for a solicited receive")
	}
	var wcs [8]rdma.WC
	if n := cq.Poll(wcs[:]); n != 5 {
		t.Fatalf("%d completions, want 5", n)
	}
	if err := p.a.scq.ReqNotify(false); err == nil {
		t.Fatal("ReqNotify on a CQ without a channel")
	}
}

// TestCloseFlushes: Close completes outstanding work with WRFlushErr, is
// idempotent, makes later calls fail and leaves no goroutine behind.
func TestCloseFlushes(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPair(t, pairOpts{realClock: true})
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 7, SGList: p.b.sge(0, 8)}}))
	p.b.dev.Close()
	p.b.dev.Close()
	var wc [2]rdma.WC
	if n := p.b.rcq.Poll(wc[:]); n != 1 || wc[0].Status != rdma.WCWRFlushErr {
		t.Fatalf("after Close: %d completions %+v", n, wc[0])
	}
	if err := p.qb.PostRecv([]rdma.RecvWR{{}}); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("post after close: %v", err)
	}
	if _, err := p.b.dev.AllocPD(); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("alloc PD after close: %v", err)
	}
	a := rdma.QPAttr{QPState: rdma.QPStateReset}
	if err := p.qb.Modify(&a, rdma.QPAttrState); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("modify after close: %v", err)
	}
	p.b.dev.Deliver(make([]byte, 100)) // dropped, no panic
	// A WRITE to the closed peer times out on the real clock (timeout 1 =
	// 8 us, no retries).
	a = rdma.QPAttr{QPState: rdma.QPStateSQD}
	p.qa.Modify(&a, rdma.QPAttrState)
	a = rdma.QPAttr{QPState: rdma.QPStateSQD, Timeout: 1, RetryCnt: 0}
	if err := p.qa.Modify(&a, rdma.QPAttrState|rdma.QPAttrTimeout|rdma.QPAttrRetryCnt); err != nil {
		t.Fatal(err)
	}
	a = rdma.QPAttr{QPState: rdma.QPStateRTS}
	p.qa.Modify(&a, rdma.QPAttrState)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRetryExcErr, rdma.WCRDMAWrite)
	p.a.dev.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched() // timer goroutines of time.AfterFunc finish on their own
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestHostMemory(t *testing.T) {
	m := rdma.NewHostMemory(64)
	if err := m.WriteAt([]byte{1, 2, 3}, 62); !errors.Is(err, rdma.ErrBadAddress) {
		t.Fatalf("write past the end: %v", err)
	}
	if err := m.ReadAt(make([]byte, 1), 1<<63); !errors.Is(err, rdma.ErrBadAddress) {
		t.Fatalf("read far past the end: %v", err)
	}
	old, err := m.FetchAndAdd64(8, 5)
	if err != nil || old != 0 {
		t.Fatal(old, err)
	}
	if old, _ = m.CompareAndSwap64(8, 4, 9); old != 5 {
		t.Fatalf("CAS miss returned %d", old)
	}
	if old, _ = m.CompareAndSwap64(8, 5, 9); old != 5 || m.Bytes()[8] != 9 {
		t.Fatalf("CAS hit returned %d, memory %d (little-endian)", old, m.Bytes()[8])
	}
	if _, err := m.FetchAndAdd64(4, 1); !errors.Is(err, rdma.ErrUnaligned) {
		t.Fatalf("unaligned: %v", err)
	}
	if _, err := m.CompareAndSwap64(64, 0, 0); !errors.Is(err, rdma.ErrBadAddress) {
		t.Fatalf("CAS outside: %v", err)
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{rdma.WCRetryExcErr.String(), "transport retry counter exceeded"},
		{rdma.WCWRFlushErr.String(), "Work Request Flushed Error"},
		{rdma.WCStatus(99).String(), "unknown"},
		{rdma.QPStateRTS.String(), "RTS"},
		{(rdma.QPAttrAV | rdma.QPAttrPathMTU).String(), "AV|PathMTU"},
		{(rdma.AccessLocalWrite | rdma.AccessRemoteRead).String(), "LocalWrite|RemoteRead"},
		{rdma.MTU4096.String(), "4096"},
		{rdma.WRRDMAWriteWithImm.String(), "RDMA_WRITE_WITH_IMM"},
		{rdma.WCRecvRDMAWithImm.String(), "RECV_RDMA_WITH_IMM"},
		{(rdma.SendSignaled | rdma.SendInline).String(), "Signaled|Inline"},
		{rdma.QPTypeRC.String(), "RC"},
		{(&rdma.PostError{Index: 2, Err: rdma.ErrNoResources}).Error(), "rdma: work request 2: rdma: out of resources"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if d := rdma.LocalAckTimeout(14); d != 67108864*time.Nanosecond {
		t.Errorf("timeout 14 = %v", d)
	}
	if rdma.LocalAckTimeout(0) != 0 || rdma.RNRTimerDuration(0) != 655360*time.Microsecond || rdma.RNRTimerDuration(31) != 491520*time.Microsecond {
		t.Error("timer tables")
	}
}
