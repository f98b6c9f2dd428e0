package rdma

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// MWType is a memory window type (enum ibv_mw_type; IBA Vol 1 10.6.7).
type MWType uint32

// Memory window types.
const (
	MWType1 MWType = 1 // IBV_MW_TYPE_1: bound through ibv_bind_mw, PD-scoped
	MWType2 MWType = 2 // IBV_MW_TYPE_2: bound by a BIND_MW WR, QP-scoped
)

// mwKeyBit marks a memory window's R_Key: bits 30..8 index the window
// table, bits 7..0 are the key variant. An MR's index is below 1<<23
// (DeviceConfig.MaxMR), so the two key spaces never meet and the
// responder tells by one bit which table an R_Key names.
const mwKeyBit = 1 << 31

// DefaultMaxMW is DeviceConfig.MaxMW's default.
const DefaultMaxMW = 4096

// MW is a memory window (IBA Vol 1 10.6.7): a range of a registered
// region, with its own R_Key and remote access rights, that the owner
// binds, invalidates and rebinds without registering memory. Its state is
// one immutable binding swapped atomically, so the responder reads a
// window without a lock.
type MW struct {
	dev   *Device
	pd    *PD
	typ   MWType
	index uint32
	// bind is the current binding; nil once deallocated.
	bind atomic.Pointer[mwBinding]
}

// mwBinding is a window's state at one moment. mr == nil means not bound
// (a type 2 window that is free, a type 1 window bound with length 0):
// its R_Key then grants nothing.
type mwBinding struct {
	rkey   uint32
	mr     *MR
	va     uint64
	length uint64
	access Access
	qp     *QP // type 2: the QP it is bound to
}

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// RKey returns the window's current R_Key (0 once deallocated).
func (mw *MW) RKey() uint32 {
	if b := mw.bind.Load(); b != nil {
		return b.rkey
	}
	return 0
}

// Bound reports whether the window grants access now, and to what.
func (mw *MW) Bound() (va, length uint64, access Access, ok bool) {
	b := mw.bind.Load()
	if b == nil || b.mr == nil {
		return 0, 0, 0, false
	}
	return b.va, b.length, b.access, true
}

// AllocMW allocates a memory window of pd (ibv_alloc_mw). A type 1
// window starts valid and unbound, a type 2 window free; both get an
// R_Key whose variant byte is random.
func (d *Device) AllocMW(pd *PD, typ MWType) (*MW, error) {
	if err := d.checkPD(pd); err != nil {
		return nil, fmt.Errorf("rdma: alloc MW: %w", err)
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("rdma: alloc MW: type %d: %w", typ, ErrInvalid)
	}
	d.mu.Lock() // orders against PD.Dealloc
	defer d.mu.Unlock()
	d.mrMu.Lock()
	defer d.mrMu.Unlock()
	if d.nMW >= d.cfg.MaxMW {
		return nil, fmt.Errorf("rdma: alloc MW: %d MWs allocated (MaxMW): %w", d.nMW, ErrNoResources)
	}
	var idx uint32
	if n := len(d.mwFree); n > 0 {
		idx, d.mwFree = d.mwFree[n-1], d.mwFree[:n-1]
	} else {
		idx = uint32(len(d.mwKeyGn))
		d.mwKeyGn = append(d.mwKeyGn, 0)
	}
	d.mwKeyGn[idx] += 1 + uint8(rand.N(255))
	mw := &MW{dev: d, pd: pd, typ: typ, index: idx}
	mw.bind.Store(&mwBinding{rkey: mwKeyBit | idx<<8 | uint32(d.mwKeyGn[idx])})
	d.mwTab.store(idx, mw)
	d.nMW++
	pd.refs.Add(1)
	return mw, nil
}

// Dealloc deallocates the window (ibv_dealloc_mw): its R_Key stops
// granting access at once, bound or not.
func (mw *MW) Dealloc() error {
	d := mw.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mrMu.Lock()
	defer d.mrMu.Unlock()
	if d.mwTab.load(mw.index) != mw {
		return fmt.Errorf("rdma: dealloc MW %d: not allocated: %w", mw.index, ErrInvalid)
	}
	mw.bind.Store(nil)
	d.mwTab.store(mw.index, nil)
	d.mwFree = append(d.mwFree, mw.index)
	d.nMW--
	mw.pd.refs.Add(-1)
	return nil
}

// lookupMW returns the window whose table slot key names, whatever its
// variant byte, or nil. Engine hot path: no allocation.
func (d *Device) lookupMW(key uint32) *MW {
	if key&mwKeyBit == 0 {
		return nil
	}
	return d.mwTab.load((key &^ mwKeyBit) >> 8)
}

// remoteMR checks an R_Key of a request against the responder QP (IBA
// 10.6.7.2 and 9.7.5.1.3): an MR's key must name a live region of the
// QP's PD; a window's key must be its current R_Key, the window bound (to
// this QP for type 2) and of the QP's PD. The region or window must grant
// need and hold [va, va+n). A QP whose service takes no windows (UC)
// reads every key as an MR's. It returns the MR to access, or nil.
func (qp *QP) remoteMR(rkey uint32, va, n uint64, need Access) *MR {
	d := qp.dev
	pd := qp.respPD() // an XRC target's is its SRQ's
	if rkey&mwKeyBit == 0 || !qp.svc().windows {
		return d.localMR(rkey, va, n, pd, need)
	}
	mw := d.lookupMW(rkey)
	if mw == nil || mw.pd != pd {
		return nil
	}
	b := mw.bind.Load()
	if b == nil || b.rkey != rkey || b.mr == nil || b.access&need == 0 ||
		(b.qp != nil && b.qp != qp) || !b.mr.valid.Load() {
		return nil
	}
	if va < b.va || n > b.length || va-b.va > b.length-n {
		return nil
	}
	return b.mr
}

// MWBind is a bind request (struct ibv_mw_bind_info with the window and
// its new R_Key): the BIND_MW work request's operands.
type MWBind struct {
	// MWKey names the window: its table slot (the variant byte is not
	// compared, since a type 2 window's consumer keeps the key it bound
	// with, not the one it allocated).
	MWKey uint32
	// NewRKey is the R_Key the window gets; only its variant byte (bits
	// 7..0) is the consumer's, the rest must be MWKey's.
	NewRKey uint32
	LKey    uint32 // the MR the window covers (unused when Length is 0)
	Addr    uint64
	Length  uint64
	Access  Access // remote rights the window grants (IBV_ACCESS_*)
}

// mwBindAccess are the rights a bind may ask for; LocalWrite is accepted
// and ignored (pyverbs passes it), as rxe does.
const mwBindAccess = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// bindMW executes a BIND_MW WR on the QP (IBA 10.6.7.2, the checks rxe's
// rxe_check_bind_mw makes, with the C10-xx rules they cite) and reports
// its completion status: Success or MWBindErr.
func (qp *QP) bindMW(b *MWBind) WCStatus {
	d := qp.dev
	mw := d.lookupMW(b.MWKey)
	if mw == nil || mw.pd != qp.pd || (b.NewRKey^b.MWKey)&^0xff != 0 {
		return WCMWBindErr
	}
	if b.Access&^mwBindAccess != 0 {
		return WCMWBindErr // zero-based windows (o10-36.2.2) and unknown bits
	}
	cur := mw.bind.Load()
	if cur == nil {
		return WCMWBindErr
	}
	if mw.typ == MWType2 {
		// o10-37.2.30: a type 2 window is bound only when free;
		// o10-37.2.40: and not with length 0.
		if cur.mr != nil || b.Length == 0 {
			return WCMWBindErr
		}
	}
	nb := &mwBinding{rkey: b.NewRKey}
	if b.Length > 0 {
		mr := d.lookupMR(b.LKey)
		switch {
		case mr == nil || mr.pd != qp.pd:
			return WCMWBindErr
		case mr.access&AccessMWBind == 0: // C10-73
			return WCMWBindErr
		case b.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && mr.access&AccessLocalWrite == 0: // C10-74
			return WCMWBindErr
		case !mr.contains(b.Addr, b.Length): // C10-75
			return WCMWBindErr
		}
		nb.mr, nb.va, nb.length, nb.access = mr, b.Addr, b.Length, b.Access&^AccessLocalWrite
		if mw.typ == MWType2 {
			nb.qp = qp
		}
	}
	if !mw.bind.CompareAndSwap(cur, nb) {
		return WCMWBindErr // deallocated or rebound meanwhile
	}
	qp.dev.ctr.mwBinds.Add(1)
	return WCSuccess
}

// invalidateKey invalidates rkey for the QP, by a LOCAL_INV WR or an
// incoming SEND_WITH_INV (IBA 10.6.7.2.6, 10.6.7.3): only a bound type 2
// window of the QP's PD with exactly this R_Key can be; type 1 windows
// and MRs (HiNIC has no fast-registration MRs) cannot. On success the
// window is free and keeps its R_Key, which grants nothing until the next
// bind.
func (qp *QP) invalidateKey(rkey uint32) bool {
	mw := qp.dev.lookupMW(rkey)
	if mw == nil || mw.pd != qp.respPD() || mw.typ != MWType2 {
		return false
	}
	cur := mw.bind.Load()
	if cur == nil || cur.rkey != rkey || cur.mr == nil {
		return false
	}
	if !mw.bind.CompareAndSwap(cur, &mwBinding{rkey: rkey}) {
		return false
	}
	qp.dev.ctr.mwInvalidates.Add(1)
	return true
}
