package integration

import (
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestConsBeforeCompletion: when a guest sees a WQE's completion, the
// device has already published that WQE's consumption in the queue's
// dbrec. The provider counts a queue's room by that index, and the
// engine writes completions into the guest's CQ itself (the CQ sink),
// possibly before the backend's doorbell thread is back from posting:
// published after, a process that polled a completion and posted again
// at once found its SQ full (perftest's ib_atomic_lat, with a TX depth
// of 1: "Couldn't post send"). Each iteration posts one SEND and one
// receive and checks both indices at both completions.
func TestConsBeforeCompletion(t *testing.T) {
	tb := newTestbed(t, 2)
	a := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	b := newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	a.connect(t, b)
	b.connect(t, a)
	const n = 2000
	for i := range uint32(n) {
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, uint64(i))
		if got := a.qp.SQTaken(); got != i+1 {
			t.Fatalf("SEND %d completed with the SQ's consumer index at %d", i, got)
		}
		wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(i))
		if got := b.qp.RQTaken(); got != i+1 {
			t.Fatalf("receive %d completed with the RQ's consumer index at %d", i, got)
		}
	}
}
