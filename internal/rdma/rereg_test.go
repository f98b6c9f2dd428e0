package rdma_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestReregMRPages: ibv_rereg_mr's device side changes a page-list MR's
// translation, access and PD in place. The keys stay; a write through
// the rkey lands in the new pages only; access taken away is refused
// (REM_ACCESS_ERR) and given is honoured; a rereg that fails leaves the
// MR as it was; a region moved to another PD is out of reach of the old
// PD's QPs and keeps that PD from being deallocated.
func TestReregMRPages(t *testing.T) {
	const page = 4096
	const iova = 0x7f00_0000_0000
	const length = 2 * page
	pages1 := []uint64{0x40000, 0x42000}
	pages2 := []uint64{0x60000, 0x63000}
	src := uint64(0x10000) // in A's all-memory MR

	write := func(p *pair, wrid uint64, rkey uint32, n int) {
		t.Helper()
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: wrid, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
			SGList: []rdma.SGE{{Addr: src, Length: uint32(n), LKey: p.a.mr.LKey}}, RemoteAddr: iova, RKey: rkey}}))
	}

	p := newPair(t, pairOpts{memSize: 1 << 20, mtu: 1024})
	want := make([]byte, length)
	fill(want, 7)
	copy(p.a.mem.Bytes()[src:], want)
	mr, err := p.b.dev.RegMRPages(p.b.pd, iova, length, page, pages1, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	lkey, rkey := mr.LKey, mr.RKey
	write(p, 1, rkey, page)
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
	memB := p.b.mem.Bytes()
	if !bytes.Equal(memB[pages1[0]:pages1[0]+page], want[:page]) {
		t.Fatal("the write before the rereg did not land")
	}

	// Translation and access: new pages, remote read added.
	mr2, err := p.b.dev.ReregMRPages(mr, p.b.pd, iova, length, page, pages2,
		rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if mr2.LKey != lkey || mr2.RKey != rkey {
		t.Fatalf("keys %#x/%#x after the rereg, want %#x/%#x", mr2.LKey, mr2.RKey, lkey, rkey)
	}
	if mr2.Access()&rdma.AccessRemoteRead == 0 || mr2.Addr() != iova || mr2.Length() != length {
		t.Fatalf("rereg gave access %v, [%#x, +%#x)", mr2.Access(), mr2.Addr(), mr2.Length())
	}
	clear(memB[pages1[0] : pages1[0]+page])
	write(p, 2, rkey, length)
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMAWrite)
	if !bytes.Equal(memB[pages2[0]:pages2[0]+page], want[:page]) ||
		!bytes.Equal(memB[pages2[1]:pages2[1]+page], want[page:]) {
		t.Fatal("the write after the rereg did not land in the new pages")
	}
	if !bytes.Equal(memB[pages1[0]:pages1[0]+page], make([]byte, page)) {
		t.Fatal("the write after the rereg reached the old pages")
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 3, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
		SGList: []rdma.SGE{{Addr: 0x20000, Length: 64, LKey: p.a.mr.LKey}}, RemoteAddr: iova, RKey: rkey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 3, rdma.WCSuccess, rdma.WCRDMARead)

	// A rereg that fails (too few pages) leaves the MR as it was.
	if _, err := p.b.dev.ReregMRPages(mr2, p.b.pd, iova, length, page, pages2[:1],
		rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("rereg with too few pages: %v, want ErrInvalid", err)
	}
	if _, err := p.b.dev.ReregMRPages(mr, p.b.pd, iova, length, page, pages1,
		rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("rereg of the replaced region: %v, want ErrInvalid", err)
	}
	write(p, 4, rkey, 64)
	wantWC(t, p.poll(p.a.scq, 1)[0], 4, rdma.WCSuccess, rdma.WCRDMAWrite)

	// Remote write taken away: the same rkey is refused.
	mr3, err := p.b.dev.ReregMRPages(mr2, p.b.pd, iova, length, page, pages2, rdma.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	write(p, 5, rkey, 64)
	wantWC(t, p.poll(p.a.scq, 1)[0], 5, rdma.WCRemAccessErr, rdma.WCRDMAWrite)

	// Another PD: the old PD's QP no longer reaches the region, and the
	// new PD cannot go while the region is in it.
	q := newPair(t, pairOpts{memSize: 1 << 20, mtu: 1024})
	copy(q.a.mem.Bytes()[src:], want)
	pd2, err := q.b.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.b.dev.RegMRPages(q.b.pd, iova, length, page, pages1, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := q.b.dev.ReregMRPages(m, pd2, iova, length, page, pages1, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if m2.PD() != pd2 || m2.RKey != m.RKey {
		t.Fatal("the region did not move to the new PD with its keys")
	}
	if err := pd2.Dealloc(); !errors.Is(err, rdma.ErrBusy) {
		t.Fatalf("dealloc of the region's new PD: %v, want ErrBusy", err)
	}
	write(q, 6, m2.RKey, 64)
	wantWC(t, q.poll(q.a.scq, 1)[0], 6, rdma.WCRemAccessErr, rdma.WCRDMAWrite)
	if err := mr3.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := m2.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd2.Dealloc(); err != nil {
		t.Fatalf("dealloc of the emptied PD: %v", err)
	}
}
