package rdma

import "unsafe"

// Host memory of the objects a consumer creates, for a backend that
// gives each of its guests a budget (internal/device). Each figure is an
// upper bound on what the object comes to hold: its rings and per-WR
// buffers full, as the engine allocates them when they are used. The
// Go runtime's own rounding is not counted.
const (
	sizeofSGE     = int64(unsafe.Sizeof(SGE{}))
	sizeofMRPtr   = int64(unsafe.Sizeof((*MR)(nil)))
	sizeofSendWQE = int64(unsafe.Sizeof(sendWQE{}))
	sizeofRecvWQE = int64(unsafe.Sizeof(recvWQE{}))
	sizeofWC      = int64(unsafe.Sizeof(WC{}))
	sizeofReadRes = int64(unsafe.Sizeof(readRes{}))
)

// QPMemory is the most host memory a QP created with c holds: its send
// ring with every WR at c's SGE and inline limits, its receive ring with
// every WR at the receive SGE limit, and its responder resources. A QP
// with an SRQ has no receive ring (pass MaxRecvWR 0).
func (d *Device) QPMemory(c QPCap) int64 {
	sq, _ := ringSize(c.MaxSendWR)
	rq, _ := ringSize(c.MaxRecvWR)
	sendWR := sizeofSendWQE + int64(max(c.MaxSendSGE, 1))*(sizeofSGE+sizeofMRPtr) + int64(c.MaxInlineData)
	recvWR := sizeofRecvWQE + int64(max(c.MaxRecvSGE, 1))*(sizeofSGE+sizeofMRPtr)
	return int64(unsafe.Sizeof(QP{})) + int64(sq)*sendWR + int64(rq)*recvWR +
		int64(max(d.cfg.MaxQPRDAtomic, 1))*sizeofReadRes
}

// CQMemory is the most host memory a CQ of cqe completions holds.
func CQMemory(cqe int) int64 { return int64(unsafe.Sizeof(CQ{})) + int64(cqe)*sizeofWC }

// SRQMemory is the most host memory an SRQ of maxWR WRs of maxSGE
// scatter elements holds.
func SRQMemory(maxWR, maxSGE int) int64 {
	n, _ := ringSize(maxWR)
	return int64(unsafe.Sizeof(SRQ{})) + int64(n)*(sizeofRecvWQE+int64(max(maxSGE, 1))*(sizeofSGE+sizeofMRPtr))
}

// MRMemory is the host memory of an MR registered with a list of pages
// pages (RegMRPages keeps the list).
func MRMemory(pages int) int64 { return int64(unsafe.Sizeof(MR{})) + 8*int64(pages) + sizeofMRPtr }

// MWMemory is the most host memory a memory window holds: the window,
// its binding (one being replaced, while a bind runs) and its table slot.
func MWMemory() int64 {
	return int64(unsafe.Sizeof(MW{})) + 2*int64(unsafe.Sizeof(mwBinding{})) + sizeofMRPtr + 1
}

// AHMemory is the host memory of an address handle.
func AHMemory() int64 { return int64(unsafe.Sizeof(AH{})) }

// XRCDMemory is the host memory of an XRC domain.
func XRCDMemory() int64 { return int64(unsafe.Sizeof(XRCD{})) }

// TMSRQMemory is the most host memory the tag list of a TM SRQ of
// maxTags tagged buffers holds, on top of SRQMemory: each entry with
// its SGEs and its place in the posting order.
func TMSRQMemory(maxTags int) int64 {
	return int64(maxTags) * (int64(unsafe.Sizeof(tmTag{})) + TMMaxSGE*sizeofSGE + 4)
}

// TMQPMemory is what a QP on a TM SRQ holds on top of QPMemory: the
// send slots of the rendezvous READs and FINs the device makes.
func TMQPMemory() int64 {
	return tmRndvSendWQEs * (sizeofSendWQE + TMMaxSGE*(sizeofSGE+sizeofMRPtr) + TMHeaderLen)
}
