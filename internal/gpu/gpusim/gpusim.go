// Package gpusim is a guest-driver simulator for the HiGPU backend. It
// does what QEMU and higpu.ko do together, without a VM: it opens the
// guest RAM file, connects to the ivshmem socket as QEMU's
// ivshmem-doorbell does, maps BAR2, performs the handshake, writes
// commands into the command ring in guest memory, rings doorbells, takes
// MSI-X interrupts and reads the completion ring.
//
// It is for tests. A Guest is safe for concurrent use.
package gpusim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/guestmem"
	"github.com/PacketFive/hinic/internal/ivshmem"
)

// Config describes the simulated VM and its driver's rings.
type Config struct {
	Socket  string           // the GPU's ivshmem socket
	RAMPath string           // memory-backend-file mem-path
	RAMSize uint64           // -m
	Machine guestmem.Machine // pc or q35 (default q35)
	Vectors int              // vectors=N; 0 = gpu.DefaultVectors
	CmdN    uint32           // command ring entries; 0 = 64
	CplN    uint32           // completion ring entries; 0 = 64
}

// Guest is one simulated VM with a HiGPU function.
type Guest struct {
	cfg  Config
	peer *ivshmem.Peer
	hdr  *gpu.DevHdr
	ram  *guestmem.RAM

	allocMu sync.Mutex
	next    uint64

	mu      sync.Mutex // ring state below
	cmdN    uint32
	cplN    uint32
	cmdGPA  uint64
	cplGPA  uint64
	cmdProd uint32
	cplCons uint32
	got     map[uint64]gpu.Cpl // completions read, not yet waited for
	order   []uint64           // tags in completion order
	irqs    [gpu.NumIRQ]atomic.Uint64
	tag     atomic.Uint64
}

// Connect plays QEMU's start-up: it opens the RAM file and connects to
// the ivshmem server.
func Connect(ctx context.Context, cfg Config) (*Guest, error) {
	if cfg.Vectors == 0 {
		cfg.Vectors = gpu.DefaultVectors
	}
	if cfg.Machine == "" {
		cfg.Machine = guestmem.MachineQ35
	}
	if cfg.CmdN == 0 {
		cfg.CmdN = 64
	}
	if cfg.CplN == 0 {
		cfg.CplN = 64
	}
	ram, err := guestmem.Open(cfg.RAMPath, cfg.RAMSize, cfg.Machine)
	if err != nil {
		return nil, err
	}
	p, err := ivshmem.DialDevice(ctx, cfg.Socket, cfg.Vectors, int(unsafe.Sizeof(gpu.DevHdr{})))
	if err != nil {
		ram.Close()
		return nil, fmt.Errorf("gpusim: %w", err)
	}
	g := &Guest{cfg: cfg, peer: p, ram: ram, hdr: (*gpu.DevHdr)(unsafe.Pointer(&p.SHM[0])),
		next: 1 << 20, got: map[uint64]gpu.Cpl{}}
	return g, nil
}

// Close disconnects the guest, as QEMU exiting does.
func (g *Guest) Close() error {
	g.peer.Close()
	return g.ram.Close()
}

// Header returns BAR2's device header; fields the device changes must be
// read with sync/atomic.
func (g *Guest) Header() *gpu.DevHdr { return g.hdr }

// RAM returns the guest's RAM.
func (g *Guest) RAM() *guestmem.RAM { return g.ram }

// Ring rings doorbell v.
func (g *Guest) Ring(v int) { g.peer.Ring(v) }

// IRQs returns the interrupts vector v delivered so far (as the waits
// saw them).
func (g *Guest) IRQs(v int) uint64 {
	g.pollIRQ(v, 0)
	return g.irqs[v].Load()
}

func (g *Guest) pollIRQ(v int, d time.Duration) bool {
	n := g.peer.WaitIRQ(v, d)
	g.irqs[v].Add(n)
	return n > 0
}

// Alloc returns n bytes of zeroed guest memory aligned to align (a power
// of two), below 4 GiB.
func (g *Guest) Alloc(n, align uint64) (uint64, error) {
	g.allocMu.Lock()
	defer g.allocMu.Unlock()
	gpa := (g.next + align - 1) &^ (align - 1)
	b, err := g.ram.Slice(gpa, n)
	if err != nil {
		return 0, fmt.Errorf("gpusim: out of guest memory: %w", err)
	}
	clear(b)
	g.next = gpa + n
	return gpa, nil
}

// Mem returns the guest memory at gpa.
func (g *Guest) Mem(gpa, n uint64) []byte {
	b, err := g.ram.Slice(gpa, n)
	if err != nil {
		panic(err) // the tests' own addresses
	}
	return b
}

// Rings describes the rings a handshake programs; zero fields are
// filled in by Handshake.
type Rings struct {
	CmdGPA, CplGPA uint64
	CmdN, CplN     uint32
	ABI            uint32 // driver_abi; 0 = this package's
	NoMSIX         bool   // leave HIGPU_DRV_MSIX_ON clear
}

// Handshake is the driver's probe with rings of the configured sizes.
func (g *Guest) Handshake(ctx context.Context) error { return g.HandshakeWith(ctx, Rings{}) }

// HandshakeWith programs r (filling its zero fields) and announces the
// driver; it waits for LIVE and returns an error naming the fatal code
// when the device refuses.
func (g *Guest) HandshakeWith(ctx context.Context, r Rings) error {
	h := g.hdr
	if m := atomic.LoadUint32(&h.Magic); m != gpu.Magic {
		return fmt.Errorf("gpusim: BAR2 magic %#x", m)
	}
	if h.ABIMajor != gpu.ABIMajor {
		return fmt.Errorf("gpusim: ABI %d", h.ABIMajor)
	}
	var err error
	if r.CmdN == 0 {
		r.CmdN = g.cfg.CmdN
	}
	if r.CplN == 0 {
		r.CplN = g.cfg.CplN
	}
	if r.CmdGPA == 0 {
		if r.CmdGPA, err = g.Alloc(uint64(r.CmdN)*64, gpu.RingAlign); err != nil {
			return err
		}
	}
	if r.CplGPA == 0 {
		if r.CplGPA, err = g.Alloc(uint64(r.CplN)*32, gpu.RingAlign); err != nil {
			return err
		}
	}
	if r.ABI == 0 {
		r.ABI = gpu.ABIMajor<<16 | gpu.ABIMinor
	}
	g.mu.Lock()
	g.cmdGPA, g.cplGPA, g.cmdN, g.cplN = r.CmdGPA, r.CplGPA, r.CmdN, r.CplN
	g.cmdProd, g.cplCons = 0, 0
	clear(g.got)
	g.order = nil
	g.mu.Unlock()
	for i := range gpu.NumIRQ {
		g.pollIRQ(i, 0)
	}
	atomic.StoreUint64(&h.CmdRingGPA, r.CmdGPA)
	atomic.StoreUint64(&h.CplRingGPA, r.CplGPA)
	atomic.StoreUint32(&h.CmdEntries, r.CmdN)
	atomic.StoreUint32(&h.CplEntries, r.CplN)
	atomic.StoreUint32(&h.CmdProd, 0)
	atomic.StoreUint32(&h.CplCons, 0)
	atomic.StoreUint32(&h.DriverABI, r.ABI)
	drv := uint32(gpu.DrvOK | gpu.DrvMSIXOn)
	if r.NoMSIX {
		drv = gpu.DrvOK
	}
	atomic.StoreUint32(&h.DriverStatus, drv)
	g.Ring(gpu.DBCtrl)
	return g.waitStatus(ctx, gpu.DevLive)
}

// DevStatus returns dev_status.
func (g *Guest) DevStatus() uint32 { return atomic.LoadUint32(&g.hdr.DevStatus) }

// FatalCode returns fatal_code.
func (g *Guest) FatalCode() uint32 { return atomic.LoadUint32(&g.hdr.FatalCode) }

// FatalError is returned when the device is fatal.
type FatalError struct{ Code uint32 }

func (e *FatalError) Error() string { return fmt.Sprintf("gpusim: device fatal, code %d", e.Code) }

func (g *Guest) waitStatus(ctx context.Context, bits uint32) error {
	for {
		st := g.DevStatus()
		if st&gpu.DevFatal != 0 {
			return &FatalError{g.FatalCode()}
		}
		if st&bits == bits {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("gpusim: dev_status %#x: %w", st, err)
		}
		g.pollIRQ(gpu.IRQCtrl, 2*time.Millisecond)
	}
}

// WaitFatal waits until the device is fatal and returns its code.
func (g *Guest) WaitFatal(ctx context.Context) (uint32, error) {
	err := g.waitStatus(ctx, 1<<31)
	if fe, ok := err.(*FatalError); ok {
		return fe.Code, nil
	}
	return 0, err
}

// Reset asks the device to reset and waits for reset_count to move and
// READY; the driver then redoes the handshake.
func (g *Guest) Reset(ctx context.Context) error {
	h := g.hdr
	rc := atomic.LoadUint32(&h.ResetCount)
	atomic.StoreUint32(&h.DriverStatus, gpu.DrvReset)
	g.Ring(gpu.DBCtrl)
	for atomic.LoadUint32(&h.ResetCount) == rc || atomic.LoadUint32(&h.Magic) != gpu.Magic ||
		g.DevStatus() != gpu.DevReady {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("gpusim: reset: %w", err)
		}
		g.pollIRQ(gpu.IRQCtrl, 2*time.Millisecond)
	}
	return nil
}

// Tag returns a fresh command tag.
func (g *Guest) Tag() uint64 { return g.tag.Add(1) }

// Post writes commands into the command ring, waiting for room, then
// publishes cmd_prod and rings HIGPU_DB_CMD once.
func (g *Guest) Post(ctx context.Context, cmds ...gpu.Cmd) error {
	h := g.hdr
	for len(cmds) > 0 {
		g.mu.Lock()
		cons := atomic.LoadUint32(&h.CmdCons)
		n := 0
		for ; n < len(cmds) && g.cmdProd-cons < g.cmdN; n++ {
			slot := g.cmdGPA + uint64(g.cmdProd&(g.cmdN-1))*64
			copy(g.Mem(slot, 64), unsafe.Slice((*byte)(unsafe.Pointer(&cmds[n])), 64))
			g.cmdProd++
		}
		atomic.StoreUint32(&h.CmdProd, g.cmdProd) // release: entries before the index
		g.mu.Unlock()
		if n > 0 {
			g.Ring(gpu.DBCmd)
		}
		cmds = cmds[n:]
		if len(cmds) > 0 {
			// The ring is full: consume completions so the device
			// can take more, then look again.
			g.reap()
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("gpusim: command ring full: %w", err)
			}
			g.pollIRQ(gpu.IRQCpl, time.Millisecond)
		}
	}
	return nil
}

// SetCmdProd publishes a raw cmd_prod (hostile-driver tests) and rings
// the doorbell.
func (g *Guest) SetCmdProd(v uint32) {
	atomic.StoreUint32(&g.hdr.CmdProd, v)
	g.Ring(gpu.DBCmd)
}

// WriteCmdSlot writes raw bytes into command slot i (fuzzing).
func (g *Guest) WriteCmdSlot(i uint32, b []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	copy(g.Mem(g.cmdGPA+uint64(i&(g.cmdN-1))*64, 64), b)
}

// reap reads the completions the device posted, frees their slots
// (cpl_cons, HIGPU_DB_CPL) and keeps them for Wait.
func (g *Guest) reap() {
	h := g.hdr
	g.mu.Lock()
	prod := atomic.LoadUint32(&h.CplProd) // acquire
	moved := false
	for ; g.cplCons != prod; g.cplCons++ {
		var c gpu.Cpl
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&c)), 32), g.Mem(g.cplGPA+uint64(g.cplCons&(g.cplN-1))*32, 32))
		g.got[c.Tag] = c
		g.order = append(g.order, c.Tag)
		moved = true
	}
	if moved {
		atomic.StoreUint32(&h.CplCons, g.cplCons)
	}
	g.mu.Unlock()
	if moved {
		g.Ring(gpu.DBCpl)
	}
}

// Order returns the tags of every completion read so far, in ring order.
func (g *Guest) Order() []uint64 {
	g.reap()
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.order...)
}

// Wait waits for the completion of tag.
func (g *Guest) Wait(ctx context.Context, tag uint64) (gpu.Cpl, error) {
	for {
		g.reap()
		g.mu.Lock()
		c, ok := g.got[tag]
		if ok {
			delete(g.got, tag)
		}
		g.mu.Unlock()
		if ok {
			return c, nil
		}
		if st := g.DevStatus(); st&gpu.DevFatal != 0 {
			return gpu.Cpl{}, &FatalError{g.FatalCode()}
		}
		if err := ctx.Err(); err != nil {
			return gpu.Cpl{}, fmt.Errorf("gpusim: no completion of tag %d: %w", tag, err)
		}
		g.pollIRQ(gpu.IRQCpl, 5*time.Millisecond)
	}
}

// Do posts one command (a fresh tag unless it has one) and waits for its
// completion.
func (g *Guest) Do(ctx context.Context, c gpu.Cmd) (gpu.Cpl, error) {
	if c.Tag == 0 {
		c.Tag = g.Tag()
	}
	if err := g.Post(ctx, c); err != nil {
		return gpu.Cpl{}, err
	}
	return g.Wait(ctx, c.Tag)
}

// Status is a completion status as an error (nil for OK).
type Status uint16

func (s Status) Error() string { return fmt.Sprintf("gpusim: completion status %d", uint16(s)) }

// do runs c and turns a bad status into an error.
func (g *Guest) do(ctx context.Context, c gpu.Cmd) (uint64, error) {
	cpl, err := g.Do(ctx, c)
	if err != nil {
		return 0, err
	}
	if cpl.Status != gpu.StOK {
		return 0, Status(cpl.Status)
	}
	return cpl.Result, nil
}

// CtxCreate creates a context.
func (g *Guest) CtxCreate(ctx context.Context) (uint16, error) {
	r, err := g.do(ctx, gpu.Cmd{Opcode: gpu.OpCtxCreate})
	return uint16(r), err
}

// CtxDestroy destroys context id.
func (g *Guest) CtxDestroy(ctx context.Context, id uint16) error {
	_, err := g.do(ctx, gpu.Cmd{Opcode: gpu.OpCtxDestroy, CtxID: id})
	return err
}

// MemAlloc allocates size bytes of device memory for context id.
func (g *Guest) MemAlloc(ctx context.Context, id uint16, size, align uint64) (uint64, error) {
	return g.do(ctx, gpu.NewCmd(gpu.OpMemAlloc, id, 0, 0, gpu.ArgsAlloc{Size: size, Align: align}))
}

// MemFree frees an allocation of context id.
func (g *Guest) MemFree(ctx context.Context, id uint16, addr uint64) error {
	_, err := g.do(ctx, gpu.NewCmd(gpu.OpMemFree, id, 0, 0, gpu.ArgsFree{Addr: addr}))
	return err
}

// Copy runs a copy command (op COPY_H2D, _D2H or _D2D) on stream 0.
func (g *Guest) Copy(ctx context.Context, op, id uint16, dst, src, n uint64, sg uint32) error {
	_, err := g.do(ctx, gpu.NewCmd(op, id, 0, 0, gpu.ArgsCopy{Dst: dst, Src: src, Len: n, SGCount: sg}))
	return err
}

// QueryCtx reads context id's information (flags HIGPU_QUERY_F_*).
func (g *Guest) QueryCtx(ctx context.Context, id uint16, flags uint32) (gpu.CtxInfo, error) {
	var info gpu.CtxInfo
	gpa, err := g.Alloc(64, 64)
	if err != nil {
		return info, err
	}
	if _, err := g.do(ctx, gpu.NewCmd(gpu.OpQuery, id, 0, 0, gpu.ArgsQuery{What: gpu.QueryCtx, Flags: flags, RespGPA: gpa, RespLen: 64})); err != nil {
		return info, err
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&info)), unsafe.Sizeof(info)), g.Mem(gpa, uint64(unsafe.Sizeof(info))))
	return info, nil
}

// QueryDevice reads the device information.
func (g *Guest) QueryDevice(ctx context.Context) (gpu.DevInfo, error) {
	var info gpu.DevInfo
	gpa, err := g.Alloc(128, 64)
	if err != nil {
		return info, err
	}
	if _, err := g.do(ctx, gpu.NewCmd(gpu.OpQuery, 0, 0, 0, gpu.ArgsQuery{What: gpu.QueryDevice, RespGPA: gpa, RespLen: 128})); err != nil {
		return info, err
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&info)), unsafe.Sizeof(info)), g.Mem(gpa, uint64(unsafe.Sizeof(info))))
	return info, nil
}

// PeerAccess enables (or disables) context id's access to GPU peer.
func (g *Guest) PeerAccess(ctx context.Context, id, peer uint16, enable bool) error {
	a := gpu.ArgsPeer{PeerID: peer}
	if enable {
		a.Enable = 1
	}
	_, err := g.do(ctx, gpu.NewCmd(gpu.OpPeerAccess, id, 0, 0, a))
	return err
}
