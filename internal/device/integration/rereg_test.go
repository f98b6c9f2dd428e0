package integration

import (
	"bytes"
	"errors"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestReregMR: REREG_MR (ABI 1.8) moves an MR to other guest pages,
// another access and another PD in place. Its keys stay; a write through
// its rkey lands in the new pages only; remote write taken away and a PD
// the peer's QP does not share are refused; an unknown lkey, an unknown
// PD and a bad page list leave the MR as it was.
func TestReregMR(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	g := tb.guests[1]
	write := func(id uint64, n uint32) {
		t.Helper()
		a.qp.PostSend(device.SendWQE{WRID: id, Opcode: uint8(rdma.WRRDMAWrite),
			SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf, RKey: b.rkey},
			[]device.SGE{{Addr: a.buf, Length: n, LKey: a.lkey}}, nil)
	}
	want := fill(t, tb.guests[0], a.buf, 4096, 3)
	gpa2, err := g.Alloc(b.size, 4096, false)
	if err != nil {
		t.Fatal(err)
	}

	// The same IOVA (b.buf) on other pages: the peer's rkey reaches them.
	lkey, rkey, err := g.ReregMR(ctx, b.lkey, b.pd, gpa2, b.buf, b.size, b.access)
	if err != nil {
		t.Fatal(err)
	}
	if lkey != b.lkey || rkey != b.rkey {
		t.Fatalf("keys %#x/%#x after REREG_MR, want %#x/%#x", lkey, rkey, b.lkey, b.rkey)
	}
	write(1, 4096)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 1)
	if !bytes.Equal(read(t, g, gpa2, 4096), want) {
		t.Fatal("the write did not land in the MR's new pages")
	}
	if !bytes.Equal(read(t, g, b.buf, 4096), make([]byte, 4096)) {
		t.Fatal("the write reached the MR's old pages")
	}

	// Refused: an unknown lkey, an unknown PD, a page list outside RAM.
	var st *guestsim.StatusError
	if _, _, err := g.ReregMR(ctx, b.lkey^0x100, b.pd, gpa2, b.buf, b.size, b.access); !errors.As(err, &st) ||
		st.Status != device.StENOENT {
		t.Fatalf("REREG_MR of an unknown lkey: %v, want ENOENT", err)
	}
	if _, _, err := g.ReregMR(ctx, b.lkey, 999, gpa2, b.buf, b.size, b.access); !errors.As(err, &st) ||
		st.Status != device.StENOENT {
		t.Fatalf("REREG_MR to an unknown PD: %v, want ENOENT", err)
	}
	if _, _, err := g.ReregMR(ctx, b.lkey, b.pd, 1<<40, b.buf, b.size, b.access); !errors.As(err, &st) ||
		st.Status != device.StEFAULT {
		t.Fatalf("REREG_MR to pages outside RAM: %v, want EFAULT", err)
	}
	write(2, 64)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 2)

	// Another PD: the QP of the MR's old PD no longer reaches it.
	pd2, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.ReregMR(ctx, b.lkey, pd2, gpa2, b.buf, b.size, b.access); err != nil {
		t.Fatal(err)
	}
	write(3, 64)
	wantCQE(t, a.scq, rdma.WCRemAccessErr, rdma.WCRDMAWrite, 3)
}
