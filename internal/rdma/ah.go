package rdma

import (
	"fmt"
	"sync/atomic"
)

// AH is an address handle (ibv_ah): an address vector checked once when it
// is created, for the datagram work requests that name their destination
// per request. RC QPs take their address vector in Modify (QPAttrAV), as in
// libibverbs. An AH holds a reference on its PD. Safe for concurrent use.
type AH struct {
	pd   *PD
	attr AHAttr
	path txPath // the frame template of a datagram to this destination
	dead atomic.Bool
}

// CreateAH validates attr as the engine would route it and returns a
// handle. RoCE needs a GRH (IsGlobal) and, for a unicast destination not on
// this device, the next-hop MAC in DMAC. A multicast DGID (ff00::/8) is
// accepted without a DMAC: the MAC follows from the group (RFC 1112 for
// IPv4-mapped 224.0.0.0/4 groups, RFC 2464 for ff00::/8).
func (d *Device) CreateAH(pd *PD, attr AHAttr) (*AH, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if pd == nil || pd.dev != d || pd.dead.Load() {
		return nil, fmt.Errorf("rdma: create AH: PD is not valid on this device: %w", ErrInvalid)
	}
	path, err := d.checkAH(&attr)
	if err != nil {
		return nil, fmt.Errorf("rdma: create AH: %w", err)
	}
	attr.PortNum = 1
	pd.refs.Add(1)
	return &AH{pd: pd, attr: attr, path: path}, nil
}

func (d *Device) checkAH(attr *AHAttr) (txPath, error) {
	if d.ib() {
		return d.buildPathIB(0, attr, true)
	}
	g := &attr.GRH
	if !attr.IsGlobal || !isMcastGID(g.DGID) {
		return d.buildPath(0, 0, attr)
	}
	// Multicast: the checks of buildPath that apply to a group.
	if attr.PortNum > 1 {
		return txPath{}, fmt.Errorf("AV: port %d does not exist: %w", attr.PortNum, ErrInvalid)
	}
	gids := d.gidTable()
	if int(g.SGIDIndex) >= len(gids) {
		return txPath{}, fmt.Errorf("AV: SGID index %d outside the %d-entry GID table: %w", g.SGIDIndex, len(gids), ErrInvalid)
	}
	sgid := gids[g.SGIDIndex]
	if ipv4Mapped(sgid) != ipv4Mapped(g.DGID) {
		return txPath{}, fmt.Errorf("AV: SGID %d and multicast DGID %s are of different IP families: %w",
			g.SGIDIndex, gidString(g.DGID), ErrInvalid)
	}
	return d.mcastPath(attr, sgid), nil
}

// Attr returns the address vector.
func (ah *AH) Attr() AHAttr { return ah.attr }

// PD returns the protection domain the AH belongs to.
func (ah *AH) PD() *PD { return ah.pd }

// Destroy releases the handle and its PD reference.
func (ah *AH) Destroy() error {
	if !ah.dead.CompareAndSwap(false, true) {
		return fmt.Errorf("rdma: destroy AH: already destroyed: %w", ErrInvalid)
	}
	ah.pd.refs.Add(-1)
	return nil
}
