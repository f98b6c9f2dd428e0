package guestsim

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/device"
)

// StatusError is an admin command that completed with a non-zero status.
type StatusError struct {
	Opcode uint16
	Status uint16 // errno
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("guestsim: admin opcode %d: status %d", e.Opcode, e.Status)
}

// Admin posts one admin command, rings the control doorbell and waits
// for its completion. A non-zero status is a *StatusError.
func (g *Guest) Admin(ctx context.Context, cmd *device.AdminCmd) (device.AdminCQE, error) {
	g.adminMu.Lock()
	defer g.adminMu.Unlock()
	h := g.hdr
	g.cmdID++
	cmd.CmdID = g.cmdID
	prod := atomic.LoadUint32(&h.AdminSQProd)
	off := device.AdminSQOff + int(prod%device.AdminSQEntries)*int(unsafe.Sizeof(*cmd))
	copy(g.shm[off:], device.AsBytes(cmd))
	atomic.StoreUint32(&h.AdminSQProd, prod+1) // release: entry before index
	g.Ring(device.DBCtrl)
	cons := atomic.LoadUint32(&h.AdminCQCons)
	for atomic.LoadUint32(&h.AdminCQProd) == cons {
		if s := atomic.LoadUint32(&h.DevStatus); s&device.DevFatal != 0 {
			return device.AdminCQE{}, fmt.Errorf("guestsim: device fatal, code %d", atomic.LoadUint32(&h.FatalCode))
		}
		if err := g.pause(ctx, device.IRQCtrl); err != nil {
			return device.AdminCQE{}, err
		}
	}
	var cqe device.AdminCQE
	coff := device.AdminCQOff + int(cons%device.AdminCQEntries)*int(unsafe.Sizeof(cqe))
	copy(device.AsBytes(&cqe), g.shm[coff:])
	atomic.StoreUint32(&h.AdminCQCons, cons+1)
	if cqe.CmdID != cmd.CmdID {
		return cqe, fmt.Errorf("guestsim: completion for command %d, want %d", cqe.CmdID, cmd.CmdID)
	}
	if cqe.Status != device.StOK {
		return cqe, &StatusError{Opcode: cmd.Opcode, Status: cqe.Status}
	}
	return cqe, nil
}

func (g *Guest) simple(ctx context.Context, op uint16, handle uint32) (device.AdminCQE, error) {
	return g.Admin(ctx, &device.AdminCmd{Opcode: op, Handle: handle})
}

// AllocPD allocates a protection domain.
func (g *Guest) AllocPD(ctx context.Context) (uint32, error) {
	c, err := g.simple(ctx, device.CmdAllocPD, 0)
	return c.Handle, err
}

// Destroy runs a destroy/dealloc/dereg command on handle.
func (g *Guest) Destroy(ctx context.Context, op uint16, handle uint32) error {
	_, err := g.simple(ctx, op, handle)
	return err
}

// QueryDevice returns the device attributes.
func (g *Guest) QueryDevice(ctx context.Context) (device.DeviceAttr, error) {
	var a device.DeviceAttr
	err := g.query(ctx, device.CmdQueryDevice, 0, device.AsBytes(&a))
	return a, err
}

// QueryPort returns port 1's attributes.
func (g *Guest) QueryPort(ctx context.Context) (device.PortAttr, error) {
	var a device.PortAttr
	err := g.query(ctx, device.CmdQueryPort, 1, device.AsBytes(&a))
	return a, err
}

// QueryCounters returns port 1's counters (QUERY_COUNTERS).
func (g *Guest) QueryCounters(ctx context.Context) (device.PortCounters, error) {
	var c device.PortCounters
	err := g.query(ctx, device.CmdQueryCounters, 1, device.AsBytes(&c))
	return c, err
}

// QueryQP returns a QP's attributes.
func (g *Guest) QueryQP(ctx context.Context, qpn uint32) (device.QPAttr, error) {
	var a device.QPAttr
	err := g.query(ctx, device.CmdQueryQP, qpn, device.AsBytes(&a))
	return a, err
}

// QueryGID returns GID index.
func (g *Guest) QueryGID(ctx context.Context, index uint32) ([16]byte, error) {
	c, err := g.simple(ctx, device.CmdQueryGID, index)
	var gid [16]byte
	copy(gid[:], c.Out[:16])
	return gid, err
}

func (g *Guest) query(ctx context.Context, op uint16, handle uint32, out []byte) error {
	gpa, err := g.Alloc(uint64(len(out)), 64, false)
	if err != nil {
		return err
	}
	if _, err := g.Admin(ctx, &device.AdminCmd{Opcode: op, Handle: handle, RespGPA: gpa,
		RespLen: uint32(len(out))}); err != nil {
		return err
	}
	return g.ram.ReadAt(out, gpa)
}

// RegMR registers [gpa, gpa+length) with IOVA iova, as a page list of
// 4 KiB pages (the memory is contiguous in GPA space here; a kernel
// driver would pass the umem's pages).
func (g *Guest) RegMR(ctx context.Context, pd uint32, gpa, iova, length uint64, access uint32) (lkey, rkey uint32, err error) {
	pages, err := contiguousPages(gpa, iova, length)
	if err != nil {
		return 0, 0, err
	}
	return g.RegMRPages(ctx, pd, iova, length, 12, pages, access)
}

// ReregMR gives the MR of lkey the PD pd, access and [gpa, gpa+length)
// at IOVA iova (REREG_MR, ABI 1.8), as RegMR describes a region.
func (g *Guest) ReregMR(ctx context.Context, lkey, pd uint32, gpa, iova, length uint64, access uint32) (uint32, uint32, error) {
	pages, err := contiguousPages(gpa, iova, length)
	if err != nil {
		return 0, 0, err
	}
	return g.mrCmd(ctx, device.CmdReregMR, lkey, pd, iova, length, 12, pages, access)
}

func contiguousPages(gpa, iova, length uint64) ([]uint64, error) {
	const ps = 4096
	first := gpa &^ (ps - 1)
	if iova%ps != gpa%ps {
		return nil, fmt.Errorf("guestsim: iova and gpa must share the page offset")
	}
	n := (gpa + length - first + ps - 1) / ps
	pages := make([]uint64, n)
	for i := range pages {
		pages[i] = first + uint64(i)*ps
	}
	return pages, nil
}

// RegMRPages registers an MR from an explicit page list (any GPAs, for
// bad-guest tests).
func (g *Guest) RegMRPages(ctx context.Context, pd uint32, iova, length uint64, pageShift uint32, pages []uint64, access uint32) (lkey, rkey uint32, err error) {
	return g.mrCmd(ctx, device.CmdRegMR, 0, pd, iova, length, pageShift, pages, access)
}

func (g *Guest) mrCmd(ctx context.Context, op uint16, handle, pd uint32, iova, length uint64, pageShift uint32,
	pages []uint64, access uint32) (lkey, rkey uint32, err error) {
	list, err := g.Alloc(uint64(len(pages))*8, 8, false)
	if err != nil {
		return 0, 0, err
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&pages[0])), len(pages)*8)
	if err := g.ram.WriteAt(b, list); err != nil {
		return 0, 0, err
	}
	cmd := device.AdminCmd{Opcode: op, Handle: handle}
	*device.PayloadOf[device.CmdRegMRArgs](&cmd) = device.CmdRegMRArgs{PD: pd, Access: access, IOVA: iova,
		Length: length, PageListGPA: list, NPages: uint32(len(pages)), PageShift: pageShift}
	c, err := g.Admin(ctx, &cmd)
	if err != nil {
		return 0, 0, err
	}
	return le32(c.Out[0:]), le32(c.Out[4:]), nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// CQ is a guest completion queue: a ring and a dbrec in guest memory.
// Owned by one goroutine.
type CQ struct {
	g      *Guest
	CQN    uint32
	ring   uint64
	pages  []uint64 // a paged ring's pages (device.CQFPaged), else nil
	dbrec  uint64
	depth  uint32
	cons   uint32
	vector int
}

// cqRing allocates a ring of depth CQEs: contiguous, or (paged) as
// separate pages whose page table it writes in guest memory, the pages
// allocated in reverse order so the ring is not contiguous.
func (g *Guest) cqRing(depth uint32, paged bool) (ring uint64, pages []uint64, flags uint32, err error) {
	bytes := uint64(depth) * 64
	if !paged {
		ring, err = g.Alloc(bytes, 64, false)
		return ring, nil, 0, err
	}
	n := (bytes + device.CQPageSize - 1) / device.CQPageSize
	pages = make([]uint64, n)
	for i := int(n) - 1; i >= 0; i-- {
		if pages[i], err = g.Alloc(device.CQPageSize, device.CQPageSize, false); err != nil {
			return 0, nil, 0, err
		}
		// A hole between pages, so that no two are adjacent.
		if _, err = g.Alloc(64, 64, false); err != nil {
			return 0, nil, 0, err
		}
	}
	if ring, err = g.Alloc(n*8, 8, false); err != nil {
		return 0, nil, 0, err
	}
	tbl := make([]byte, n*8)
	for i, p := range pages {
		binary.LittleEndian.PutUint64(tbl[i*8:], p)
	}
	if err := g.ram.WriteAt(tbl, ring); err != nil {
		return 0, nil, 0, err
	}
	return ring, pages, device.CQFPaged, nil
}

func (cq *CQ) slot(i uint32) uint64 {
	off := uint64(i&(cq.depth-1)) * 64
	if cq.pages == nil {
		return cq.ring + off
	}
	return cq.pages[off/device.CQPageSize] + off%device.CQPageSize
}

// CreateCQ creates a CQ of depth entries (a power of two) whose
// interrupts come on comp vector compVector.
func (g *Guest) CreateCQ(ctx context.Context, depth uint32, compVector uint32) (*CQ, error) {
	return g.createCQ(ctx, depth, compVector, false)
}

// CreatePagedCQ is CreateCQ with the ring in separate 4 KiB pages
// named by a page table (ABI 1.9); depth x 64 is a multiple of 4 KiB.
func (g *Guest) CreatePagedCQ(ctx context.Context, depth uint32, compVector uint32) (*CQ, error) {
	return g.createCQ(ctx, depth, compVector, true)
}

func (g *Guest) createCQ(ctx context.Context, depth uint32, compVector uint32, paged bool) (*CQ, error) {
	ring, pages, flags, err := g.cqRing(depth, paged)
	if err != nil {
		return nil, err
	}
	db, err := g.Alloc(16, 16, false)
	if err != nil {
		return nil, err
	}
	cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
	*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: ring, DBRecGPA: db,
		Depth: depth, CompVector: compVector, Flags: flags}
	c, err := g.Admin(ctx, &cmd)
	if err != nil {
		return nil, err
	}
	return &CQ{g: g, CQN: c.Handle, ring: ring, pages: pages, dbrec: db, depth: depth,
		vector: device.IRQCQBase + int(compVector)}, nil
}

// DBRec returns the GPA of the CQ's dbrec (prod at +0, cons at +4).
func (cq *CQ) DBRec() uint64 { return cq.dbrec }

// Resize moves the CQ to a new ring of depth entries (RESIZE_CQ). The
// completions not yet polled come first in the new ring.
func (cq *CQ) Resize(ctx context.Context, depth uint32) error {
	return cq.resize(ctx, depth, false)
}

// ResizePaged is Resize to a paged ring (ABI 1.9).
func (cq *CQ) ResizePaged(ctx context.Context, depth uint32) error {
	return cq.resize(ctx, depth, true)
}

func (cq *CQ) resize(ctx context.Context, depth uint32, paged bool) error {
	ring, pages, flags, err := cq.g.cqRing(depth, paged)
	if err != nil {
		return err
	}
	db, err := cq.g.Alloc(16, 16, false)
	if err != nil {
		return err
	}
	cmd := device.AdminCmd{Opcode: device.CmdResizeCQ, Handle: cq.CQN}
	*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: ring, DBRecGPA: db,
		Depth: depth, CompVector: uint32(cq.vector - device.IRQCQBase), Flags: flags}
	if _, err := cq.g.Admin(ctx, &cmd); err != nil {
		return err
	}
	cq.ring, cq.pages, cq.dbrec, cq.depth, cq.cons = ring, pages, db, depth, 0
	return nil
}

// Poll returns the completions the device wrote since the last Poll.
func (cq *CQ) Poll() []device.CQE {
	ram := cq.g.ram
	prod, _ := ram.Load32(cq.dbrec) // acquire
	var out []device.CQE
	for ; cq.cons != prod; cq.cons++ {
		var e device.CQE
		ram.ReadAt(device.AsBytes(&e), cq.slot(cq.cons))
		out = append(out, e)
	}
	ram.Store32(cq.dbrec+4, cq.cons) // release
	return out
}

// PollInto moves up to len(out) completions into out and returns how
// many; unlike Poll it allocates nothing (allocation tests).
func (cq *CQ) PollInto(out []device.CQE) int {
	ram := cq.g.ram
	prod, _ := ram.Load32(cq.dbrec) // acquire
	n := 0
	for ; cq.cons != prod && n < len(out); cq.cons++ {
		ram.ReadAt(device.AsBytes(&out[n]), cq.slot(cq.cons))
		n++
	}
	ram.Store32(cq.dbrec+4, cq.cons) // release
	return n
}

// Arm asks for an interrupt at the next completion (req_notify_cq) and
// rings the CQ doorbell so the device sees completions already pending.
func (cq *CQ) Arm() {
	cq.g.ram.Store32(cq.dbrec+8, device.CQArmNext)
	cq.g.Ring(device.DBCQ)
}

// Events reads the dbrec's interrupt count (ABI 1.7).
func (cq *CQ) Events() uint32 {
	v, _ := cq.g.ram.Load32(cq.dbrec + 12)
	return v
}

// WaitIRQ waits up to d for the CQ's interrupt.
func (cq *CQ) WaitIRQ(d time.Duration) bool { return cq.g.WaitIRQ(cq.vector, d) }

// Wait polls until n completions arrived or ctx ends, sleeping on the
// CQ's interrupt between polls.
func (cq *CQ) Wait(ctx context.Context, n int) ([]device.CQE, error) {
	var out []device.CQE
	for {
		out = append(out, cq.Poll()...)
		if len(out) >= n {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("guestsim: CQ %d: %d of %d completions: %w", cq.CQN, len(out), n, err)
		}
		cq.Arm()
		out = append(out, cq.Poll()...)
		if len(out) >= n {
			return out, nil
		}
		cq.WaitIRQ(5 * time.Millisecond)
	}
}

// QPConfig shapes a QP.
type QPConfig struct {
	PD             uint32
	SendCQ, RecvCQ *CQ
	SQDepth        uint32 // default 64
	RQDepth        uint32 // default 64
	MaxSGE         uint32 // default 4, both queues
	MaxInline      uint32 // default 64
	SigAll         bool
	Type           uint32 // IB_QPT_*: 0 or 2 RC, 1 GSI, 3 UC, 4 UD
	// SMI asks for QP0 (IB_QPT_SMI, type 0 on the wire; Type is ignored).
	SMI bool
	SRQ *SRQ // receive WQEs from this SRQ: the QP has no RQ ring
	// XRCD is the domain of an XRC target QP (Type QPTypeXRCTgt), which
	// has no rings, CQs or PD.
	XRCD uint32
	// AV makes room in each send WQE for an address vector (ABI 1.3,
	// PostSendAV) before the SGEs or inline data.
	AV bool
	// NoSQ makes a raw packet QP a receive work queue (ABI 1.16:
	// sq_depth 0); with NoRQ too it is an RSS QP, without CQs.
	NoSQ, NoRQ bool
}

// QP is a guest RC or UD QP with its rings in guest memory. Owned by one
// goroutine.
type QP struct {
	g                *Guest
	QPN              uint32
	sq, rq           uint64
	sqDB, rqDB       uint64
	sqDepth, rqDepth uint32
	sqStride         uint32
	rqStride         uint32
	sqProd, rqProd   uint32
}

// CreateQP creates a QP (RC unless c.Type says otherwise).
func (g *Guest) CreateQP(ctx context.Context, c QPConfig) (*QP, error) {
	if c.Type == 0 {
		c.Type = QPTypeRC
	}
	if c.SMI {
		c.Type = 0
	}
	if c.SQDepth == 0 {
		c.SQDepth = 64
	}
	if c.RQDepth == 0 {
		c.RQDepth = 64
	}
	if c.MaxSGE == 0 {
		c.MaxSGE = 4
	}
	if c.MaxInline == 0 {
		c.MaxInline = 64
	}
	avRoom := uint32(0)
	if c.AV {
		avRoom = uint32(unsafe.Sizeof(device.WQEAV{}))
	}
	sqStride := (64 + avRoom + max(16*c.MaxSGE, c.MaxInline) + 63) &^ 63
	rqStride := 16 + 16*c.MaxSGE
	q := &QP{g: g, sqDepth: c.SQDepth, rqDepth: c.RQDepth, sqStride: sqStride, rqStride: rqStride}
	if c.Type == QPTypeXRCTgt {
		cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
		*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = device.CmdCreateQPArgs{QPType: c.Type, XRCD: c.XRCD}
		r, err := g.Admin(ctx, &cmd)
		if err != nil {
			return nil, err
		}
		q.QPN = r.Handle
		return q, nil
	}
	noRQ := c.SRQ != nil || c.Type == QPTypeXRCIni || c.NoRQ
	var err error
	if c.NoSQ {
		q.sqDepth = 0
	} else if q.sq, err = g.Alloc(uint64(c.SQDepth*sqStride), 4096, false); err != nil {
		return nil, err
	} else if q.sqDB, err = g.Alloc(wqDBRecSize, 8, false); err != nil {
		return nil, err
	}
	if !noRQ {
		if q.rq, err = g.Alloc(uint64(c.RQDepth*rqStride), 4096, false); err != nil {
			return nil, err
		}
		if q.rqDB, err = g.Alloc(wqDBRecSize, 8, false); err != nil {
			return nil, err
		}
	}
	cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
	a := device.CmdCreateQPArgs{PD: c.PD, QPType: c.Type, SQDepth: q.sqDepth, MaxSendSGE: c.MaxSGE,
		MaxInline: c.MaxInline, SQStride: sqStride, SQGPA: q.sq, SQDBRecGPA: q.sqDB}
	if c.SendCQ != nil {
		a.SendCQ = c.SendCQ.CQN
	}
	if c.RecvCQ != nil {
		a.RecvCQ = c.RecvCQ.CQN
	}
	if c.Type == QPTypeXRCIni || c.NoRQ {
		// no RQ, receive CQ or SRQ
	} else if c.SRQ == nil {
		a.RQDepth, a.MaxRecvSGE, a.RQStride, a.RQGPA, a.RQDBRecGPA = c.RQDepth, c.MaxSGE, rqStride, q.rq, q.rqDB
	} else {
		a.SRQ = c.SRQ.SRQN
	}
	if c.SigAll {
		a.SQSigAll = 1
	}
	*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = a
	r, err := g.Admin(ctx, &cmd)
	if err != nil {
		return nil, err
	}
	q.QPN = r.Handle
	return q, nil
}

// AllocXRCD allocates an XRC domain (ABI 1.11).
func (g *Guest) AllocXRCD(ctx context.Context) (uint32, error) {
	c, err := g.simple(ctx, device.CmdAllocXRCD, 0)
	return c.Handle, err
}

// ModifyQP runs MODIFY_QP.
func (g *Guest) ModifyQP(ctx context.Context, qpn uint32, mask uint32, attr device.QPAttr) error {
	cmd := device.AdminCmd{Opcode: device.CmdModifyQP}
	*device.PayloadOf[device.CmdModifyQPArgs](&cmd) = device.CmdModifyQPArgs{QPN: qpn, AttrMask: mask, Attr: attr}
	_, err := g.Admin(ctx, &cmd)
	return err
}

// SQFree returns how many SQ slots the device has given back.
func (q *QP) SQFree() uint32 { return q.sqDepth - (q.sqProd - q.SQTaken()) }

// PostSend writes a send WQE (with sges, or inline data when inline is
// not nil) and rings the QP doorbell. The caller makes sure SQFree() > 0
// and that no more than the SQ depth of WRs are outstanding.
func (q *QP) PostSend(w device.SendWQE, sges []device.SGE, inline []byte) {
	ram := q.g.ram
	at := q.sq + uint64(q.sqProd&(q.sqDepth-1))*uint64(q.sqStride)
	if inline != nil {
		w.SendFlags |= device.SendInline
		w.InlineLen = uint32(len(inline))
		ram.WriteAt(inline, at+64)
	} else {
		w.NumSGE = uint8(len(sges))
		for i := range sges {
			ram.WriteAt(device.AsBytes(&sges[i]), at+64+uint64(i)*16)
		}
	}
	ram.WriteAt(device.AsBytes(&w), at)
	q.sqProd++
	ram.Store32(q.sqDB, q.sqProd) // release
	q.g.Ring(device.DBQP)
}

// PostSendAV writes a send WQE that carries its address vector (ABI
// 1.3, device.SendAV): the AV after the header, then the SGEs or the
// inline data. w.AH is not used by the device. The QP needs room for it
// (QPConfig.AV) unless a test wants a WQE that does not fit.
func (q *QP) PostSendAV(w device.SendWQE, av device.AHAttr, sges []device.SGE, inline []byte) {
	ram := q.g.ram
	at := q.sq + uint64(q.sqProd&(q.sqDepth-1))*uint64(q.sqStride)
	wav := device.WQEAV{Attr: av}
	n := uint64(unsafe.Sizeof(wav))
	ram.WriteAt(device.AsBytes(&wav), at+64)
	w.SendFlags |= device.SendAV
	if inline != nil {
		w.SendFlags |= device.SendInline
		w.InlineLen = uint32(len(inline))
		ram.WriteAt(inline, at+64+n)
	} else {
		w.NumSGE = uint8(len(sges))
		for i := range sges {
			ram.WriteAt(device.AsBytes(&sges[i]), at+64+n+uint64(i)*16)
		}
	}
	ram.WriteAt(device.AsBytes(&w), at)
	q.sqProd++
	ram.Store32(q.sqDB, q.sqProd) // release
	q.g.Ring(device.DBQP)
}

// PostRecv writes a receive WQE and rings the QP doorbell unless the
// device said it does not need it (ABI 1.18 no_db), as libhicain does.
func (q *QP) PostRecv(wrID uint64, sges []device.SGE) {
	ram := q.g.ram
	at := q.rq + uint64(q.rqProd&(q.rqDepth-1))*uint64(q.rqStride)
	w := device.RecvWQE{WRID: wrID, NumSGE: uint32(len(sges))}
	for i := range sges {
		ram.WriteAt(device.AsBytes(&sges[i]), at+16+uint64(i)*16)
	}
	ram.WriteAt(device.AsBytes(&w), at)
	q.rqProd++
	ram.Store32(q.rqDB, q.rqProd)
	q.g.ringRecv(q.rqDB)
}

// wqDBRecSize is sizeof(struct hicain_wq_dbrec).
const wqDBRecSize = uint64(unsafe.Sizeof(device.WQDBRec{}))

// ringRecv rings the QP doorbell for receive WQEs just published in the
// dbrec at db, unless its no_db word says the device will fetch them
// itself. The store of prod and this load are sequentially consistent,
// the full barrier the driver puts between them.
func (g *Guest) ringRecv(db uint64) {
	if g.NoRecvDoorbells {
		g.RecvSkipped.Add(1)
		return
	}
	if g.cfg.DriverMinor != 0 && g.cfg.DriverMinor < 18 {
		g.Ring(device.DBQP) // a driver before 1.18 knows no no_db
		return
	}
	if v, _ := g.ram.Load32(db + 8); v == 0 {
		g.Ring(device.DBQP)
	} else {
		g.RecvSkipped.Add(1)
	}
}

// SetSQProd writes a raw SQ producer index (bad-guest tests).
func (q *QP) SetSQProd(v uint32) {
	q.g.ram.Store32(q.sqDB, v)
	q.g.Ring(device.DBQP)
}

// SetRQProd writes a raw RQ producer index (bad-guest tests).
func (q *QP) SetRQProd(v uint32) {
	q.g.ram.Store32(q.rqDB, v)
	q.g.Ring(device.DBQP)
}

// WriteRings overwrites the SQ and RQ rings from their start with raw
// bytes, each cut to its ring's size, as a process may write into
// rings mapped into it (bad-guest tests). No doorbell.
func (q *QP) WriteRings(sq, rq []byte) error {
	if n := uint64(q.sqDepth) * uint64(q.sqStride); uint64(len(sq)) > n {
		sq = sq[:n]
	}
	if err := q.g.ram.WriteAt(sq, q.sq); err != nil {
		return err
	}
	if q.rq == 0 {
		return nil
	}
	if n := uint64(q.rqDepth) * uint64(q.rqStride); uint64(len(rq)) > n {
		rq = rq[:n]
	}
	return q.g.ram.WriteAt(rq, q.rq)
}

// RQTaken returns the device's RQ consumer index: receive WQEs up to
// it are in the engine (a UD datagram that arrives earlier is lost, as
// on the wire).
func (q *QP) RQTaken() uint32 {
	v, _ := q.g.ram.Load32(q.rqDB + 4)
	return v
}

// RQNoDB returns the device's no_db word of the RQ's dbrec (ABI 1.18):
// non-zero while receives may be posted without a doorbell.
func (q *QP) RQNoDB() uint32 {
	v, _ := q.g.ram.Load32(q.rqDB + 8)
	return v
}

// SetRQNoDB writes the RQ dbrec's no_db word (bad-guest and old-driver
// tests: the word is the device's).
func (q *QP) SetRQNoDB(v uint32) { q.g.ram.Store32(q.rqDB+8, v) }

// RQPosted returns the RQ producer index.
func (q *QP) RQPosted() uint32 { return q.rqProd }

// SQTaken returns the device's SQ consumer index.
func (q *QP) SQTaken() uint32 {
	v, _ := q.g.ram.Load32(q.sqDB + 4)
	return v
}

// MADIfc hands the port's SMA one 256-byte MAD (MAD_IFC, ABI 1.4) and
// returns its answer, or nil when the device wrote none.
func (g *Guest) MADIfc(ctx context.Context, mad []byte) ([]byte, error) {
	if len(mad) != device.MADSize {
		return nil, fmt.Errorf("guestsim: MAD_IFC: %d-byte MAD", len(mad))
	}
	in, err := g.Alloc(device.MADSize, 64, false)
	if err != nil {
		return nil, err
	}
	out, err := g.Alloc(device.MADSize, 64, false)
	if err != nil {
		return nil, err
	}
	if err := g.ram.WriteAt(mad, in); err != nil {
		return nil, err
	}
	cmd := device.AdminCmd{Opcode: device.CmdMADIfc, Handle: 1, RespGPA: out, RespLen: device.MADSize}
	*device.PayloadOf[device.CmdMADIfcArgs](&cmd) = device.CmdMADIfcArgs{InGPA: in}
	cqe, err := g.Admin(ctx, &cmd)
	if err != nil || cqe.Out[0]&device.MADIfcReply == 0 {
		return nil, err
	}
	resp := make([]byte, device.MADSize)
	return resp, g.ram.ReadAt(resp, out)
}

// AllocMW runs ALLOC_MW (ABI 1.10) and returns the window's R_Key, its
// handle.
func (g *Guest) AllocMW(ctx context.Context, pd, typ uint32) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdAllocMW}
	*device.PayloadOf[device.CmdAllocMWArgs](&cmd) = device.CmdAllocMWArgs{PD: pd, Type: typ}
	c, err := g.Admin(ctx, &cmd)
	if err != nil {
		return 0, err
	}
	if le32(c.Out[0:]) != c.Handle {
		return 0, fmt.Errorf("ALLOC_MW: handle %#x, out R_Key %#x", c.Handle, le32(c.Out[0:]))
	}
	return c.Handle, nil
}

// BindMWWQE is the send WQE of a BIND_MW (see HICAIN_WR_BIND_MW).
func BindMWWQE(wrID uint64, mwKey, newKey, lkey uint32, addr, length uint64, access uint32, flags uint16) device.SendWQE {
	return device.SendWQE{WRID: wrID, Opcode: device.WRBindMW, SendFlags: flags, RKey: mwKey, ImmData: newKey,
		RemoteAddr: addr, CompareAdd: length, Swap: uint64(access)<<32 | uint64(lkey)}
}
