// Package guestmem maps a QEMU guest's RAM file (memory-backend-file,
// share=on) for DMA and translates guest-physical addresses to file
// offsets with bounds checks, for the x86 machine types QEMU 7.2 lays out
// (device-facts §2.2). The NIC (internal/device) and the GPU
// (internal/gpu) backends share it.
//
// guestmem imports only the standard library and golang.org/x/sys/unix.
package guestmem

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Machine is a QEMU x86 machine type; it decides where guest RAM sits in
// guest-physical space (device-facts §2.2).
type Machine string

// Machine types.
const (
	MachinePC  Machine = "pc"
	MachineQ35 Machine = "q35"
)

const (
	gib        = 1 << 30
	above4GGPA = 4 * gib
)

// BelowFourG returns how many bytes of RAM QEMU 7.2 maps below 4 GiB for a
// machine of ramSize bytes (hw/i386/pc_piix.c and pc_q35.c; default
// max-ram-below-4g, gigabyte_align on).
func BelowFourG(m Machine, ramSize uint64) (uint64, error) {
	var lowmem uint64
	switch m {
	case MachinePC:
		lowmem = 0xe0000000
		if ramSize >= lowmem {
			lowmem = 0xc0000000
		}
	case MachineQ35:
		lowmem = 0xb0000000
		if ramSize >= 0xb0000000 {
			lowmem = 0x80000000
		}
	default:
		return 0, fmt.Errorf("guestmem: machine %q: want pc or q35", m)
	}
	if ramSize >= lowmem {
		return lowmem, nil
	}
	return ramSize, nil
}

// RAM is a guest's RAM file (memory-backend-file, share=on) mapped
// shared, addressed by guest-physical address. It has the methods of
// rdma.Memory (device.GuestRAM is this type):
// every access is translated and bounds-checked, so no GPA can reach
// memory outside the file. Safe for concurrent use; like DMA, concurrent
// plain accesses to the same bytes are the guest's business.
type RAM struct {
	mem     []byte
	below4G uint64
	size    uint64
	path    string
	closed  atomic.Bool
}

// Errors of the accessors.
var (
	// ErrOutsideRAM is returned for a guest-physical range that is not RAM.
	ErrOutsideRAM = errors.New("guestmem: GPA outside guest RAM")
	// ErrUnaligned is returned for an atomic access off its size.
	ErrUnaligned = errors.New("guestmem: unaligned atomic access")
	// ErrUnsafeFile is wrapped by OpenPrivate's (and Open's) errors for
	// a memory file that is a symbolic link or not a regular file, or
	// whose mode cannot be narrowed to 0600.
	ErrUnsafeFile = errors.New("guestmem: unsafe memory file")
)

// OpenPrivate opens the memory file at path (a guest's RAM, a GPU's
// device memory) read-write, creating it mode 0600 when missing, and
// makes sure it is a private regular file of this user:
//
//   - A symbolic link in its place is refused (O_NOFOLLOW): the backend
//     writes guest memory into the file, and through a link planted in
//     the run directory it would write, and map, whatever file the link
//     names.
//   - Something other than a regular file (a FIFO, a device node) is
//     refused.
//   - A file readable or writable by others is narrowed to 0600 rather
//     than refused: QEMU itself creates a memory-backend-file 0644
//     (less the umask), so a RAM file QEMU made first is wider through
//     no fault of anyone; every guest byte is in it, so it must not stay
//     so. A file this user cannot chmod is refused.
//   - A file another user owns is refused, whatever its mode and even
//     for root, who could chmod it: its owner can open it again, or
//     widen its mode, at any time.
//
// Mappings and descriptors others took before the narrowing keep their
// access; the mode only stops new ones.
func OpenPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link (the guest's memory would go to the file it names); remove it, and the backend creates the file", ErrUnsafeFile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("guestmem: memory file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("guestmem: memory file: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is a %v, not a regular file", ErrUnsafeFile, path, st.Mode().Type())
	}
	// Checked before any chmod, which root could do to any file.
	if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("%w: %s belongs to uid %d, not to this user (uid %d), who could open it again whatever its mode; remove it, and the backend creates the file", ErrUnsafeFile, path, uid, os.Geteuid())
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s has mode %04o and cannot be narrowed to 0600 (%v); remove it, or give it to this user", ErrUnsafeFile, path, st.Mode().Perm(), err)
		}
	}
	return f, nil
}

// Open opens or creates the RAM file at path as QEMU does
// (create when missing, extend when empty, refuse when shorter than size)
// and maps it shared. The file is opened with OpenPrivate: a symbolic
// link is refused and a file open to others narrowed to 0600.
func Open(path string, size uint64, m Machine) (*RAM, error) {
	if size == 0 || size%4096 != 0 {
		return nil, fmt.Errorf("guestmem: RAM size %d: want a positive multiple of 4 KiB", size)
	}
	below, err := BelowFourG(m, size)
	if err != nil {
		return nil, err
	}
	f, err := OpenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("guestmem: RAM file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("guestmem: RAM file: %w", err)
	}
	switch {
	case st.Size() == 0:
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("guestmem: RAM file %s: %w", path, err)
		}
	case uint64(st.Size()) < size:
		return nil, fmt.Errorf("guestmem: RAM file %s: %d bytes, smaller than the RAM size %d", path, st.Size(), size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("guestmem: map RAM file %s: %w", path, err)
	}
	return &RAM{mem: mem, below4G: below, size: size, path: path}, nil
}

// Close unmaps the file. Later accesses fail.
func (g *RAM) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	// Accesses racing with Close are prevented by the owner (a backend
	// stops its engine first); unmap last.
	return unix.Munmap(g.mem)
}

// RAMSize returns the RAM size in bytes. (It is deliberately not named
// Size: package rdma treats a Memory with Size() as the contiguous space
// [0, Size), which a GPA space with the PCI hole below 4 GiB is not; the
// bounds checks are done here, per access.)
func (g *RAM) RAMSize() uint64 { return g.size }

// Below4G returns the RAM bytes mapped below 4 GiB.
func (g *RAM) Below4G() uint64 { return g.below4G }

// Contains reports whether [gpa, gpa+n) is guest RAM ; the RDMA
// engine (rdma.Bounded) then refuses MRs that reach into the PCI hole or
// past the end.
func (g *RAM) Contains(gpa, n uint64) bool {
	_, err := g.Offset(gpa, n)
	return err == nil
}

// Offset translates [gpa, gpa+n) to a file offset. The range must lie in
// one RAM block: below 4 GiB, or from 4 GiB on.
func (g *RAM) Offset(gpa, n uint64) (uint64, error) {
	if g.closed.Load() {
		return 0, ErrOutsideRAM
	}
	end := gpa + n
	if end < gpa {
		return 0, ErrOutsideRAM
	}
	if end <= g.below4G {
		return gpa, nil
	}
	if gpa >= above4GGPA {
		off := g.below4G + (gpa - above4GGPA)
		if off < g.below4G || off+n > g.size || off+n < off {
			return 0, ErrOutsideRAM
		}
		return off, nil
	}
	return 0, ErrOutsideRAM
}

// GPA returns the guest-physical address of file offset off.
func (g *RAM) GPA(off uint64) uint64 {
	if off < g.below4G {
		return off
	}
	return above4GGPA + off - g.below4G
}

// Slice returns the mapped bytes of [gpa, gpa+n), bounds-checked.
func (g *RAM) Slice(gpa, n uint64) ([]byte, error) {
	off, err := g.Offset(gpa, n)
	if err != nil {
		return nil, err
	}
	return g.mem[off : off+n : off+n], nil
}

// ReadAt copies guest memory at addr into p (rdma.Memory).
func (g *RAM) ReadAt(p []byte, addr uint64) error {
	b, err := g.Slice(addr, uint64(len(p)))
	if err != nil {
		return err
	}
	copy(p, b)
	return nil
}

// WriteAt copies p to guest memory at addr (rdma.Memory).
func (g *RAM) WriteAt(p []byte, addr uint64) error {
	b, err := g.Slice(addr, uint64(len(p)))
	if err != nil {
		return err
	}
	copy(b, p)
	return nil
}

// word returns the aligned word of guest memory at addr, for atomics.
func word[T uint32 | uint64](g *RAM, addr uint64) (*T, error) {
	size := uint64(unsafe.Sizeof(T(0)))
	if addr%size != 0 {
		return nil, ErrUnaligned
	}
	b, err := g.Slice(addr, size)
	if err != nil {
		return nil, err
	}
	return (*T)(unsafe.Pointer(&b[0])), nil
}

// CompareAndSwap64 is an 8-byte atomic compare-and-swap (rdma.Memory).
func (g *RAM) CompareAndSwap64(addr, compare, swap uint64) (uint64, error) {
	p, err := word[uint64](g, addr)
	if err != nil {
		return 0, err
	}
	for {
		old := atomic.LoadUint64(p)
		if old != compare {
			return old, nil
		}
		if atomic.CompareAndSwapUint64(p, old, swap) {
			return old, nil
		}
	}
}

// FetchAndAdd64 is an 8-byte atomic fetch-and-add (rdma.Memory).
func (g *RAM) FetchAndAdd64(addr, add uint64) (uint64, error) {
	p, err := word[uint64](g, addr)
	if err != nil {
		return 0, err
	}
	return atomic.AddUint64(p, add) - add, nil
}

// Load32 reads a 32-bit index at addr with acquire semantics.
func (g *RAM) Load32(addr uint64) (uint32, error) {
	p, err := word[uint32](g, addr)
	if err != nil {
		return 0, err
	}
	return atomic.LoadUint32(p), nil
}

// Store32 writes a 32-bit index at addr with release semantics.
func (g *RAM) Store32(addr uint64, v uint32) error {
	p, err := word[uint32](g, addr)
	if err != nil {
		return err
	}
	atomic.StoreUint32(p, v)
	return nil
}

// Store64 writes the 8-byte-aligned 64-bit word at addr with release
// semantics.
func (g *RAM) Store64(addr uint64, v uint64) error {
	p, err := word[uint64](g, addr)
	if err != nil {
		return err
	}
	atomic.StoreUint64(p, v)
	return nil
}

// Swap32 atomically exchanges the 32-bit word at addr.
func (g *RAM) Swap32(addr uint64, v uint32) (uint32, error) {
	p, err := word[uint32](g, addr)
	if err != nil {
		return 0, err
	}
	return atomic.SwapUint32(p, v), nil
}
