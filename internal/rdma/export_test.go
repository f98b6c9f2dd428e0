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
