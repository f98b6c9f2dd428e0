package rdma

import (
	"encoding/binary"
	"errors"
	"sync"
)

// Memory is the DMA space the engine reaches: guest RAM in the device
// backend, a host slice in tests and the embedded rack. Addresses are
// "physical" addresses of that space; memory regions translate virtual
// addresses (IOVAs) into them.
//
// Implementations must be safe for concurrent use. The engine never holds a
// slice of the space: every access is one of these calls.
type Memory interface {
	// ReadAt copies len(p) bytes at addr into p. It fails when
	// [addr, addr+len(p)) is not inside the space.
	ReadAt(p []byte, addr uint64) error
	// WriteAt copies p to addr, with the same bounds rule.
	WriteAt(p []byte, addr uint64) error
	// CompareAndSwap64 atomically replaces the 8-byte value at addr with
	// swap if it equals compare, and returns the old value. addr must be
	// 8-byte aligned. It is atomic with respect to the other engine
	// operations on the space.
	CompareAndSwap64(addr, compare, swap uint64) (old uint64, err error)
	// FetchAndAdd64 atomically adds add to the 8-byte value at addr and
	// returns the old value. addr must be 8-byte aligned.
	FetchAndAdd64(addr, add uint64) (old uint64, err error)
}

// Bounded is implemented by a Memory that can tell which ranges it backs.
// RegMR and RegMRPages refuse a region or page it does not contain, so a
// bad page list fails at registration rather than at the first DMA. A space
// with holes (guest RAM around the PCI hole below 4 GiB) implements it;
// HostMemory does, as [0, Size).
type Bounded interface {
	// Contains reports whether every byte of [addr, addr+n) is backed.
	Contains(addr, n uint64) bool
}

// Errors returned by HostMemory.
var (
	// ErrBadAddress means an access falls outside the DMA space.
	ErrBadAddress = errors.New("rdma: address outside the DMA space")
	// ErrUnaligned means an atomic access is not 8-byte aligned.
	ErrUnaligned = errors.New("rdma: atomic access not 8-byte aligned")
)

// HostMemory is a Memory backed by a Go byte slice. It is safe for
// concurrent use; as with real DMA, concurrent non-atomic accesses to the
// same bytes are the caller's business (synchronize through completions).
// The 64-bit atomics are little-endian, the byte order of the x86 and arm64
// guests HiNIC emulates.
type HostMemory struct {
	b  []byte
	mu sync.Mutex // serializes the 64-bit atomics
}

// NewHostMemory returns a zeroed space of size bytes starting at address 0.
func NewHostMemory(size int) *HostMemory { return &HostMemory{b: make([]byte, size)} }

// Bytes returns the backing slice; tests fill and check buffers through it.
func (m *HostMemory) Bytes() []byte { return m.b }

// Size returns the size of the space in bytes.
func (m *HostMemory) Size() uint64 { return uint64(len(m.b)) }

var _ Bounded = (*HostMemory)(nil)

// Contains reports whether [addr, addr+n) lies inside the memory.
func (m *HostMemory) Contains(addr, n uint64) bool {
	return addr+n >= addr && addr+n <= uint64(len(m.b))
}

func (m *HostMemory) span(addr uint64, n int) ([]byte, error) {
	size := uint64(len(m.b))
	if addr > size || size-addr < uint64(n) {
		return nil, ErrBadAddress
	}
	return m.b[addr : addr+uint64(n)], nil
}

// ReadAt implements Memory.
func (m *HostMemory) ReadAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err != nil {
		return err
	}
	copy(p, s)
	return nil
}

// WriteAt implements Memory.
func (m *HostMemory) WriteAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err != nil {
		return err
	}
	copy(s, p)
	return nil
}

// CompareAndSwap64 implements Memory.
func (m *HostMemory) CompareAndSwap64(addr, compare, swap uint64) (uint64, error) {
	if addr&7 != 0 {
		return 0, ErrUnaligned
	}
	s, err := m.span(addr, 8)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := binary.LittleEndian.Uint64(s)
	if old == compare {
		binary.LittleEndian.PutUint64(s, swap)
	}
	return old, nil
}

// FetchAndAdd64 implements Memory.
func (m *HostMemory) FetchAndAdd64(addr, add uint64) (uint64, error) {
	if addr&7 != 0 {
		return 0, ErrUnaligned
	}
	s, err := m.span(addr, 8)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := binary.LittleEndian.Uint64(s)
	binary.LittleEndian.PutUint64(s, old+add)
	return old, nil
}
