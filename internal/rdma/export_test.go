package rdma

// SetTestHookSendCompleted installs f to run on the engine goroutine right
// after each send completion is pushed; nil removes it. Tests only.
func SetTestHookSendCompleted(f func(*QP)) {
	if f == nil {
		testHookSendCompleted.Store(nil)
		return
	}
	testHookSendCompleted.Store(&f)
}

// SlotsAllocated reports how many WQE slots qp's send and receive rings
// have allocated. Tests only.
func SlotsAllocated(qp *QP) (send, recv int) { return qp.sq.allocated(), qp.rq.allocated() }

// SRQSlotsAllocated is SlotsAllocated for an SRQ. Tests only.
func SRQSlotsAllocated(s *SRQ) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ring.allocated()
}
