// Package guestsim is a guest-driver simulator for the HiNIC device
// backend. It does what QEMU and the future hicain kernel driver do
// together, without a VM: it creates the guest RAM file, connects to the
// ivshmem server socket and receives the shared memory and the eventfds
// exactly as QEMU's ivshmem-doorbell does (device-facts §1.5), maps BAR2
// and RAM, performs the driver-ready handshake, issues admin commands,
// posts WQEs into rings in guest memory, rings doorbells, polls CQEs and
// takes interrupts.
//
// It is for tests. A Guest is safe for concurrent use except where a
// method says otherwise; QP and CQ are owned by one goroutine each.
package guestsim

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/ivshmem"
)

// Config describes the simulated VM.
type Config struct {
	Socket  string         // the vNIC's ivshmem socket
	RAMPath string         // memory-backend-file mem-path
	RAMSize uint64         // -m
	Machine device.Machine // pc or q35
	Vectors int            // ivshmem-doorbell vectors=N; 0 = 8
	// DriverMinor is the ABI minor the driver announces; 0 announces
	// this build's (device.ABIMinor).
	DriverMinor uint16
}

// Guest is one simulated VM with the HiNIC PCI function.
type Guest struct {
	cfg    Config
	conn   *net.UnixConn
	peerID int
	peer   *ivshmem.Peer // the connection, BAR2 and eventfds below
	shm    []byte
	hdr    *device.DevHdr
	ram    *device.GuestRAM
	db     []int // backend's doorbell eventfds (we write)
	irq    []int // our interrupt eventfds (we read)
	msix   atomic.Bool

	adminMu sync.Mutex
	cmdID   uint32

	allocMu sync.Mutex
	low     uint64 // next free GPA below 4G
	high    uint64 // next free GPA from 4G

	irqCount []atomic.Uint64

	evMu      sync.Mutex
	evBacklog []device.EQE // read from the ring, not yet returned

	// RecvSkipped counts the receive doorbells left out (the device's
	// no_db said so, or NoRecvDoorbells).
	RecvSkipped atomic.Uint64
	// NoRecvDoorbells leaves out every receive doorbell, whatever no_db
	// says: the device finds the WQEs only when a message needs one.
	NoRecvDoorbells bool
}

// Connect plays QEMU's start-up: it opens (creating when missing) the RAM
// file, connects to the server and reads the setup messages until it has
// the shared memory and vectors eventfds in each direction.
func Connect(ctx context.Context, cfg Config) (*Guest, error) {
	if cfg.Vectors == 0 {
		cfg.Vectors = device.DefaultVectors
	}
	if cfg.Machine == "" {
		cfg.Machine = device.MachineQ35
	}
	ram, err := device.OpenGuestRAM(cfg.RAMPath, cfg.RAMSize, cfg.Machine)
	if err != nil {
		return nil, err
	}
	g := &Guest{cfg: cfg, ram: ram, low: 1 << 20, high: 4 << 30,
		irqCount: make([]atomic.Uint64, cfg.Vectors)}
	p, err := ivshmem.DialDevice(ctx, cfg.Socket, cfg.Vectors, int(unsafe.Sizeof(device.DevHdr{})))
	if err != nil {
		ram.Close()
		return nil, fmt.Errorf("guestsim: %w", err)
	}
	g.peer, g.conn, g.peerID, g.shm, g.db, g.irq = p, p.Conn, p.ID, p.SHM, p.DB, p.IRQ
	g.hdr = (*device.DevHdr)(unsafe.Pointer(&g.shm[0]))
	return g, nil
}

// Close disconnects the guest, as QEMU exiting does.
func (g *Guest) Close() error {
	g.peer.Close()
	g.shm, g.db, g.irq = nil, nil, nil
	return g.ram.Close()
}

// PeerID returns the IVPosition the server gave this guest.
func (g *Guest) PeerID() int { return g.peerID }

// Header returns BAR2's device header. Fields the device changes must be
// read with sync/atomic.
func (g *Guest) Header() *device.DevHdr { return g.hdr }

// BAR2 returns the shared memory.
func (g *Guest) BAR2() []byte { return g.shm }

// RAM returns the guest's RAM mapping.
func (g *Guest) RAM() *device.GuestRAM { return g.ram }

// Alloc returns n bytes of zeroed guest memory aligned to align (a power
// of two), below 4 GiB unless high is set.
func (g *Guest) Alloc(n, align uint64, high bool) (uint64, error) {
	g.allocMu.Lock()
	defer g.allocMu.Unlock()
	next := &g.low
	if high {
		next = &g.high
	}
	gpa := (*next + align - 1) &^ (align - 1)
	b, err := g.ram.Slice(gpa, n)
	if err != nil {
		return 0, fmt.Errorf("guestsim: out of guest memory: %w", err)
	}
	clear(b)
	*next = gpa + n
	return gpa, nil
}

// Ring writes the doorbell of vector v: BAR0 Doorbell = backend<<16 | v,
// which QEMU turns into a write on the backend's eventfd v.
func (g *Guest) Ring(v int) {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	unix.Write(g.db[v], one[:])
}

// EnableMSIX turns on interrupt delivery. Before it, interrupts are
// dropped, as QEMU does while the guest has MSI-X disabled.
func (g *Guest) EnableMSIX() {
	for _, fd := range g.irq {
		var b [8]byte
		unix.Read(fd, b[:])
	}
	g.msix.Store(true)
}

// WaitIRQ waits up to d for an interrupt on vector v and reports whether
// one came.
func (g *Guest) WaitIRQ(v int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(g.irq[v]), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d/time.Millisecond))
	if err != nil || n == 0 {
		return false
	}
	var b [8]byte
	if k, err := unix.Read(g.irq[v], b[:]); err != nil || k != 8 {
		return false
	}
	if !g.msix.Load() {
		return false
	}
	g.irqCount[v].Add(binary.LittleEndian.Uint64(b[:]))
	return true
}

// IRQs returns how many interrupts vector v delivered (as WaitIRQ saw
// them).
func (g *Guest) IRQs(v int) uint64 { return g.irqCount[v].Load() }

// Handshake is the driver's probe: check the identity, announce the
// driver with MSI-X on, ring the control doorbell and wait until the
// device is LIVE.
func (g *Guest) Handshake(ctx context.Context) error {
	h := g.hdr
	if m := atomic.LoadUint32(&h.Magic); m != device.Magic {
		return fmt.Errorf("guestsim: BAR2 magic %#x", m)
	}
	if h.ABIMajor != device.ABIMajor || h.VendorID != device.VendorID || h.DeviceID != device.DeviceID {
		return fmt.Errorf("guestsim: ABI %d, id %04x:%04x", h.ABIMajor, h.VendorID, h.DeviceID)
	}
	g.EnableMSIX()
	minor := uint32(device.ABIMinor)
	if g.cfg.DriverMinor != 0 {
		minor = uint32(g.cfg.DriverMinor)
	}
	atomic.StoreUint32(&h.DriverABI, device.ABIMajor<<16|minor)
	atomic.StoreUint32(&h.DriverStatus, device.DrvOK|device.DrvMSIXOn)
	g.Ring(device.DBCtrl)
	return g.waitStatus(ctx, device.DevLive)
}

// Reset asks the device to reset (all objects of this guest go away) and
// redoes the handshake.
func (g *Guest) Reset(ctx context.Context) error {
	h := g.hdr
	rc := atomic.LoadUint32(&h.ResetCount)
	atomic.StoreUint32(&h.DriverStatus, device.DrvReset)
	g.Ring(device.DBCtrl)
	for atomic.LoadUint32(&h.ResetCount) == rc {
		if err := g.pause(ctx, device.IRQCtrl); err != nil {
			return err
		}
	}
	g.adminMu.Lock()
	atomic.StoreUint32(&h.AdminSQProd, 0)
	atomic.StoreUint32(&h.AdminCQCons, 0)
	atomic.StoreUint32(&h.EQCons, 0)
	g.evMu.Lock()
	g.evBacklog = nil
	g.evMu.Unlock()
	atomic.StoreUint32(&h.L2TxProd, 0)
	atomic.StoreUint32(&h.L2RxProd, 0)
	g.adminMu.Unlock()
	return g.Handshake(ctx)
}

// DevStatus returns dev_status.
func (g *Guest) DevStatus() uint32 { return atomic.LoadUint32(&g.hdr.DevStatus) }

func (g *Guest) waitStatus(ctx context.Context, bits uint32) error {
	for atomic.LoadUint32(&g.hdr.DevStatus)&bits != bits {
		if s := atomic.LoadUint32(&g.hdr.DevStatus); s&device.DevFatal != 0 {
			return fmt.Errorf("guestsim: device fatal, code %d", atomic.LoadUint32(&g.hdr.FatalCode))
		}
		if err := g.pause(ctx, device.IRQCtrl); err != nil {
			return err
		}
	}
	return nil
}

// pause waits for an interrupt on v or 2 ms, whichever first; drivers
// poll state after an interrupt, never trust the interrupt alone.
func (g *Guest) pause(ctx context.Context, v int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.WaitIRQ(v, 2*time.Millisecond)
	return nil
}

// Events returns the event queue entries not yet consumed, and consumes
// them.
func (g *Guest) Events() []device.EQE {
	g.evMu.Lock()
	defer g.evMu.Unlock()
	out := append(g.evBacklog, g.readEvents()...)
	g.evBacklog = nil
	return out
}

// readEvents consumes the entries between eq_cons and eq_prod (evMu).
func (g *Guest) readEvents() []device.EQE {
	h := g.hdr
	prod := atomic.LoadUint32(&h.EQProd) // acquire: entries before index
	cons := atomic.LoadUint32(&h.EQCons)
	var out []device.EQE
	for ; cons != prod; cons++ {
		var e device.EQE
		off := device.EQOff + int(cons%device.EQEntries)*int(unsafe.Sizeof(e))
		copy(device.AsBytes(&e), g.shm[off:])
		out = append(out, e)
	}
	atomic.StoreUint32(&h.EQCons, cons)
	return out
}

// WaitEvent waits for the first event of type typ (HICAIN_EV_*) and
// returns it; events of other types stay queued for Events and later
// WaitEvent calls.
func (g *Guest) WaitEvent(ctx context.Context, typ uint32) (device.EQE, error) {
	for {
		g.evMu.Lock()
		g.evBacklog = append(g.evBacklog, g.readEvents()...)
		for i, e := range g.evBacklog {
			if e.Type == typ {
				g.evBacklog = append(g.evBacklog[:i], g.evBacklog[i+1:]...)
				g.evMu.Unlock()
				return e, nil
			}
		}
		g.evMu.Unlock()
		if err := ctx.Err(); err != nil {
			return device.EQE{}, fmt.Errorf("guestsim: no event %d: %w", typ, err)
		}
		g.WaitIRQ(device.IRQCtrl, 5*time.Millisecond)
	}
}
