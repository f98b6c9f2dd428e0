package device

// SetNextHandles moves the AH and CQ handle counters of vNIC i's guest
// to ah and cq, as 2^32 creations would have (tests of the wrap).
func SetNextHandles(srv *Server, i int, ah, cq uint32) {
	v := srv.vnics[i]
	v.mu.RLock()
	defer v.mu.RUnlock()
	v.sess.nextAH.Store(ah)
	v.sess.nextCQ.Store(cq)
}
