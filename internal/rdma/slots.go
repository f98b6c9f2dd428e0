package rdma

import "math/bits"

// slotChunk is the most WQE slots a ring allocates at a time.
const slotChunk = 64

// slots is a work queue's ring of WQE slots, a power of two of them,
// allocated a chunk at a time when the producer first reaches it, so a
// queue costs what its consumer has used, not what it asked for: a guest
// that creates a QP of 16,384 WRs and posts 10 holds one chunk (IBA
// lets a queue be created larger than it is used; a backend serving
// many guests must not pay the difference up front). A chunk, once
// allocated, is reused for the life of the ring.
//
// Only the producer allocates (slot), under the queue's post lock and
// before it publishes the index; a consumer reads (at) only indices the
// producer published, so it sees the chunk through that publication.
type slots[T any] struct {
	chunks [][]T
	mask   uint32
	shift  uint8 // log2 of a chunk's length
}

// newSlots returns a ring of at least n slots (ringSize), none
// allocated yet.
func newSlots[T any](n int) slots[T] {
	size, mask := ringSize(n)
	chunk := min(size, slotChunk)
	return slots[T]{chunks: make([][]T, size/chunk), mask: mask, shift: uint8(bits.TrailingZeros(uint(chunk)))}
}

// slot returns slot i (taken modulo the ring), allocating its chunk
// when it has none. Producer only, before it publishes i.
func (s *slots[T]) slot(i uint32) *T {
	i &= s.mask
	c := &s.chunks[i>>s.shift]
	if *c == nil {
		*c = make([]T, 1<<s.shift)
	}
	return &(*c)[i&(1<<s.shift-1)]
}

// at returns slot i (modulo the ring), which the producer has published.
func (s *slots[T]) at(i uint32) *T {
	i &= s.mask
	return &s.chunks[i>>s.shift][i&(1<<s.shift-1)]
}

// allocated is the number of slots allocated so far.
func (s *slots[T]) allocated() int {
	n := 0
	for _, c := range s.chunks {
		n += len(c)
	}
	return n
}
