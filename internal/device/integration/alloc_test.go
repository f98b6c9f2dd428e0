package integration

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestZeroAllocWQE asserts that the backend's steady-state data path
// allocates nothing per WQE or frame: the doorbell, the worker taking
// send and receive WQEs from guest rings, the engines, the fabric ports
// (recvmmsg at the backend's end, the switch), completions written to
// the guest's CQ rings. testing.AllocsPerRun counts the allocations of
// every goroutine of the process, so the whole path is covered; the
// guest side (guestsim's PostSend, PostRecv, PollInto) allocates
// nothing itself.
func TestZeroAllocWQE(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	fill(t, a.g, a.buf, 4096, 5)
	wqes := map[string]device.SendWQE{
		"write": {Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf, RKey: b.rkey},
		"send":  {Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
	}
	sges := []device.SGE{{Addr: a.buf, Length: 4096, LKey: a.lkey}}
	rsges := []device.SGE{{Addr: b.buf + 8192, Length: 4096, LKey: b.lkey}}
	cqes := make([]device.CQE, 4)
	// The wait sleeps on the CQ's interrupt, as a driver does: a
	// goroutine spinning on the ring would keep the Go scheduler from
	// running the netpoller that the fabric's sockets wake through.
	wait := func(cq *guestsim.CQ) {
		for cq.PollInto(cqes[:1]) == 0 {
			if ctx.Err() != nil {
				t.Fatal("no completion")
			}
			cq.Arm()
			if cq.PollInto(cqes[:1]) != 0 {
				break
			}
			cq.WaitIRQ(10 * time.Millisecond)
		}
		if cqes[0].Status != uint32(rdma.WCSuccess) {
			t.Fatalf("CQE %+v", cqes[0])
		}
	}
	for _, name := range []string{"write", "send"} {
		w := wqes[name]
		t.Run(name, func(t *testing.T) {
			run := func() {
				if w.Opcode == uint8(rdma.WRSend) {
					b.qp.PostRecv(1, rsges)
				}
				a.qp.PostSend(w, sges, nil)
				wait(a.scq)
				if w.Opcode == uint8(rdma.WRSend) {
					wait(b.rcq)
				}
			}
			for range 200 { // warm up the pools
				run()
			}
			if n := testing.AllocsPerRun(300, run); n != 0 {
				t.Errorf("%v allocations per WQE round trip, want 0", n)
			}
		})
	}
}
