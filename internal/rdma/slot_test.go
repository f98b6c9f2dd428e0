package rdma_test

import (
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestQueueSlotFreeWhenCompletionVisible: once a completion is visible, its
// work request's send-queue slot must already be free (a real NIC retires
// the WQE before writing the CQE). The hook posts into a one-entry send
// queue at the very moment the completion is pushed.
func TestQueueSlotFreeWhenCompletionVisible(t *testing.T) {
	p := newPair(t, pairOpts{sendWR: 1, recvWR: 4, realClock: true})
	a, b := p.a, p.b
	var (
		mu      sync.Mutex
		postErr error
		posted  int
	)
	rdma.SetTestHookSendCompleted(func(qp *rdma.QP) {
		if qp != p.qa {
			return
		}
		mu.Lock()
		done := posted > 0
		mu.Unlock()
		if done {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		posted++
		postErr = qp.PostSend([]rdma.SendWR{{WRID: 99, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: a.sge(0, 8)}})
	})
	t.Cleanup(func() { rdma.SetTestHookSendCompleted(nil) })
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: b.sge(0, 64)}, {WRID: 2, SGList: b.sge(64, 64)}}))
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: a.sge(0, 64)}}))
	wantWC(t, p.poll(a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCSend)
	mu.Lock()
	err := postErr
	mu.Unlock()
	if err != nil {
		t.Fatalf("posting when the completion became visible: %v", err)
	}
	wantWC(t, p.poll(a.scq, 1)[0], 99, rdma.WCSuccess, rdma.WCSend)
}
