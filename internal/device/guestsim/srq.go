package guestsim

import (
	"context"
	"encoding/binary"

	"github.com/PacketFive/hinic/internal/device"
)

// QP types (enum ib_qp_type) for QPConfig.Type.
const (
	QPTypeGSI = 1 // QP1
	QPTypeRC  = 2
	QPTypeUC  = 3
	QPTypeUD  = 4
	// XRC (ABI 1.11): the initiator has an SQ only, the target no rings
	// at all (QPConfig.XRCD).
	QPTypeXRCIni = 9
	QPTypeXRCTgt = 10
)

// SRQ is a guest shared receive queue: a ring of receive WQEs and a
// dbrec in guest memory. Owned by one goroutine.
type SRQ struct {
	g      *Guest
	SRQN   uint32
	ring   uint64
	db     uint64
	depth  uint32
	stride uint32
	prod   uint32
	// TM SRQ (ABI 1.13): the ops ring.
	ops, opsDB        uint64
	opsDepth, opsProd uint32
}

// SRQConfig shapes an SRQ.
type SRQConfig struct {
	PD     uint32
	Depth  uint32 // a power of two; default 64
	MaxSGE uint32 // default 2
	Limit  uint32 // arms SRQ_LIMIT at creation when non-zero
	// XRCD and CQ make an XRC SRQ (ABI 1.11): its SRQN is then the XRC
	// SRQ number requests name.
	XRCD uint32
	CQ   *CQ
	// MaxNumTags, with CQ, makes a tag-matching SRQ (ABI 1.13) whose
	// ops ring holds 16 operations.
	MaxNumTags uint32
}

// CreateSRQ creates an SRQ.
func (g *Guest) CreateSRQ(ctx context.Context, c SRQConfig) (*SRQ, error) {
	if c.Depth == 0 {
		c.Depth = 64
	}
	if c.MaxSGE == 0 {
		c.MaxSGE = 2
	}
	q := &SRQ{g: g, depth: c.Depth, stride: 16 + 16*c.MaxSGE}
	var err error
	if q.ring, err = g.Alloc(uint64(q.depth*q.stride), 4096, false); err != nil {
		return nil, err
	}
	if q.db, err = g.Alloc(wqDBRecSize, 8, false); err != nil {
		return nil, err
	}
	cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
	*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = device.CmdCreateSRQArgs{PD: c.PD, Depth: c.Depth,
		MaxSGE: c.MaxSGE, Limit: c.Limit, Stride: q.stride, RingGPA: q.ring, DBRecGPA: q.db}
	if c.CQ != nil {
		a := device.PayloadOf[device.CmdCreateSRQArgs](&cmd)
		a.SRQType, a.XRCD, a.CQ = device.SRQTXRC, c.XRCD, c.CQ.CQN
		if c.MaxNumTags != 0 {
			q.opsDepth = 16
			if q.ops, err = g.Alloc(uint64(q.opsDepth)*64, 4096, false); err != nil {
				return nil, err
			}
			if q.opsDB, err = g.Alloc(16, 8, false); err != nil {
				return nil, err
			}
			a.SRQType, a.XRCD, a.MaxNumTags, a.MaxOps = device.SRQTTM, 0, c.MaxNumTags, q.opsDepth/2
			a.OpsRingGPA, a.OpsDBRecGPA, a.OpsDepth = q.ops, q.opsDB, q.opsDepth
		}
	}
	r, err := g.Admin(ctx, &cmd)
	if err != nil {
		return nil, err
	}
	q.SRQN = r.Handle
	return q, nil
}

// PostRecv writes a receive WQE to the SRQ ring and rings the QP
// doorbell (which covers SRQs). The caller keeps at most Depth WQEs
// outstanding in the ring (Free).
func (q *SRQ) PostRecv(wrID uint64, sges []device.SGE) {
	ram := q.g.ram
	at := q.ring + uint64(q.prod&(q.depth-1))*uint64(q.stride)
	w := device.RecvWQE{WRID: wrID, NumSGE: uint32(len(sges))}
	for i := range sges {
		ram.WriteAt(device.AsBytes(&sges[i]), at+16+uint64(i)*16)
	}
	ram.WriteAt(device.AsBytes(&w), at)
	q.prod++
	ram.Store32(q.db, q.prod) // release
	q.g.ringRecv(q.db)
}

// PostOp writes a tag operation to a TM SRQ's ops ring and rings the
// QP doorbell. The caller keeps at most 16 outstanding (OpsTaken).
func (q *SRQ) PostOp(w device.TMOpWQE) {
	ram := q.g.ram
	ram.WriteAt(device.AsBytes(&w), q.ops+uint64(q.opsProd&(q.opsDepth-1))*64)
	q.opsProd++
	ram.Store32(q.opsDB, q.opsProd) // release
	q.g.Ring(device.DBQP)
}

// SetOpsProd writes a raw producer index to the ops ring (bad-guest
// tests).
func (q *SRQ) SetOpsProd(v uint32) {
	q.g.ram.Store32(q.opsDB, v)
	q.g.Ring(device.DBQP)
}

// TagsBusy returns the device's set of tag handles in use (ABI 1.13).
func (q *SRQ) TagsBusy() uint64 {
	var b [8]byte
	q.g.ram.ReadAt(b[:], q.opsDB+8)
	return binary.LittleEndian.Uint64(b[:])
}

// NoDB returns the device's no_db word of the SRQ's dbrec (ABI 1.18).
func (q *SRQ) NoDB() uint32 {
	v, _ := q.g.ram.Load32(q.db + 8)
	return v
}

// OpsTaken returns the device's consumer index of the ops ring.
func (q *SRQ) OpsTaken() uint32 {
	v, _ := q.g.ram.Load32(q.opsDB + 4)
	return v
}

// Free returns how many ring slots the device has given back.
func (q *SRQ) Free() uint32 { return q.depth - (q.prod - q.Taken()) }

// Taken returns the device's consumer index of the SRQ ring.
func (q *SRQ) Taken() uint32 {
	v, _ := q.g.ram.Load32(q.db + 4)
	return v
}

// SetProd writes a raw producer index (bad-guest tests).
func (q *SRQ) SetProd(v uint32) {
	q.g.ram.Store32(q.db, v)
	q.g.Ring(device.DBQP)
}

// ArmLimit runs MODIFY_SRQ with HICAIN_SRQ_LIMIT.
func (q *SRQ) ArmLimit(ctx context.Context, limit uint32) error {
	cmd := device.AdminCmd{Opcode: device.CmdModifySRQ}
	*device.PayloadOf[device.CmdModifySRQArgs](&cmd) = device.CmdModifySRQArgs{SRQN: q.SRQN,
		AttrMask: device.SRQLimit, Limit: limit}
	_, err := q.g.Admin(ctx, &cmd)
	return err
}

// Resize runs MODIFY_SRQ with HICAIN_SRQ_MAX_WR: the SRQ moves to a new
// ring of maxWR entries (a power of two) and a new dbrec; posting
// continues there.
func (q *SRQ) Resize(ctx context.Context, maxWR uint32) error {
	ring, err := q.g.Alloc(uint64(maxWR*q.stride), 4096, false)
	if err != nil {
		return err
	}
	db, err := q.g.Alloc(wqDBRecSize, 8, false)
	if err != nil {
		return err
	}
	cmd := device.AdminCmd{Opcode: device.CmdModifySRQ}
	*device.PayloadOf[device.CmdModifySRQArgs](&cmd) = device.CmdModifySRQArgs{SRQN: q.SRQN,
		AttrMask: device.SRQMaxWR, MaxWR: maxWR, RingGPA: ring, DBRecGPA: db}
	if _, err := q.g.Admin(ctx, &cmd); err != nil {
		return err
	}
	q.ring, q.db, q.depth, q.prod = ring, db, maxWR, 0
	return nil
}

// QuerySRQ returns an SRQ's attributes.
func (g *Guest) QuerySRQ(ctx context.Context, srqn uint32) (device.SRQAttr, error) {
	c, err := g.simple(ctx, device.CmdQuerySRQ, srqn)
	var a device.SRQAttr
	copy(device.AsBytes(&a), c.Out[:])
	return a, err
}

// CreateAH creates an address handle in pd and returns its handle.
func (g *Guest) CreateAH(ctx context.Context, pd uint32, attr device.AHAttr) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdCreateAH}
	*device.PayloadOf[device.CmdCreateAHArgs](&cmd) = device.CmdCreateAHArgs{PD: pd, Attr: attr}
	c, err := g.Admin(ctx, &cmd)
	return c.Handle, err
}

// AttachMcast attaches UD QP qpn to multicast group gid.
func (g *Guest) AttachMcast(ctx context.Context, qpn uint32, gid [16]byte) error {
	return g.mcast(ctx, device.CmdAttachMcast, qpn, gid)
}

// DetachMcast detaches UD QP qpn from group gid.
func (g *Guest) DetachMcast(ctx context.Context, qpn uint32, gid [16]byte) error {
	return g.mcast(ctx, device.CmdDetachMcast, qpn, gid)
}

func (g *Guest) mcast(ctx context.Context, op uint16, qpn uint32, gid [16]byte) error {
	cmd := device.AdminCmd{Opcode: op}
	*device.PayloadOf[device.CmdMcastArgs](&cmd) = device.CmdMcastArgs{QPN: qpn, GID: gid}
	_, err := g.Admin(ctx, &cmd)
	return err
}
