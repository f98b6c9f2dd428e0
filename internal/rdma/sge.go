package rdma

// Scatter/gather lists: the one place where a work request's SGEs and
// their lkeys become checked memory ranges (IBA 10.6.3.1, C10-23 ...
// C10-26), and the one walk that copies a message to or from them.
// Send WQEs (every QP type), receive WQEs (RQ, SRQ, UD and raw packet
// receives) and the tags of a tag-matching SRQ all resolve through
// localMR; what differs between them is only the PD the keys must
// belong to and the right the memory must grant.

// localMR checks one SGE's lkey: it must name a live MR of pd that holds
// [addr, addr+n) and grants need (0 when reading the memory needs no
// right beyond the key). It returns the MR, or nil.
func (d *Device) localMR(lkey uint32, addr, n uint64, pd *PD, need Access) *MR {
	mr := d.lookupMR(lkey)
	if mr == nil || mr.pd != pd || mr.access&need != need || !mr.contains(addr, n) {
		return nil
	}
	return mr
}

// resolveSGEs resolves the lkeys of an SGE list into mrs (grown with
// mrSlots and returned; nil for an empty SGE, which touches no memory and
// needs no key). It reports false at the first SGE localMR refuses: the
// work request then completes with a local protection error.
func (d *Device) resolveSGEs(sge []SGE, mrs []*MR, pd *PD, need Access) ([]*MR, bool) {
	mrs = mrSlots(mrs, len(sge))
	for i, s := range sge {
		mrs[i] = nil
		if s.Length == 0 {
			continue
		}
		mr := d.localMR(s.LKey, s.Addr, uint64(s.Length), pd, need)
		if mr == nil {
			return mrs, false
		}
		mrs[i] = mr
	}
	return mrs, true
}

// resolveSend resolves the SGEs of a send WQE against the QP's PD; need
// is AccessLocalWrite for a READ or atomic, whose response is written
// into them, 0 otherwise. Inline data has nothing to resolve.
func (qp *QP) resolveSend(w *sendWQE, need Access) bool {
	if w.isInline {
		return true
	}
	var ok bool
	w.mrs, ok = qp.dev.resolveSGEs(w.sge, w.mrs, qp.pd, need)
	return ok
}

// resolveRecv resolves the SGEs of a receive WQE: every non-empty SGE
// must name a live MR of the receive PD with LocalWrite that covers it.
func (qp *QP) resolveRecv(w *recvWQE) bool {
	var ok bool
	w.mrs, ok = qp.dev.resolveSGEs(w.sge, w.mrs, qp.recvPD(), AccessLocalWrite)
	return ok
}

// gather copies len(dst) bytes of w's message at offset off into dst.
func (qp *QP) gather(w *sendWQE, off int, dst []byte) bool {
	if w.isInline {
		copy(dst, w.inline[off:])
		return true
	}
	return copySGEs(w.sge, w.mrs, off, dst, false)
}

// scatter writes data at offset off of the message sge describes (a
// receive buffer, or a READ's or atomic's local buffer).
func (qp *QP) scatter(sge []SGE, mrs []*MR, off int, data []byte) bool {
	return copySGEs(sge, mrs, off, data, true)
}

// copySGEs copies between buf and bytes [off, off+len(buf)) of the
// message an SGE list describes, through the MRs resolveSGEs found: into
// the memory when write, out of it otherwise. It reports false when the
// memory fails the access.
func copySGEs(sge []SGE, mrs []*MR, off int, buf []byte, write bool) bool {
	for i, s := range sge {
		if len(buf) == 0 {
			break
		}
		if off >= int(s.Length) {
			off -= int(s.Length)
			continue
		}
		n := min(int(s.Length)-off, len(buf))
		var err error
		if write {
			err = mrs[i].write(s.Addr+uint64(off), buf[:n])
		} else {
			err = mrs[i].read(s.Addr+uint64(off), buf[:n])
		}
		if err != nil {
			return false
		}
		buf, off = buf[n:], 0
	}
	return true
}
