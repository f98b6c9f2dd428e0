package rdma

import "sync/atomic"

// ptrChunk is the slots of one chunk of a ptrTable.
const ptrChunk = 256

// ptrTable is an index of pointers that the engine reads without a lock
// (an RWMutex's reader count is a cache line every core writes on every
// lookup): chunks of atomic pointers under a directory that a writer
// replaces when the table grows. Writers serialise among themselves (the
// device's mrMu); a reader sees each slot's last store.
type ptrTable[T any] struct {
	dir atomic.Pointer[[]*[ptrChunk]atomic.Pointer[T]]
}

// load returns slot i, or nil when it is empty or past the end.
func (t *ptrTable[T]) load(i uint32) *T {
	d := t.dir.Load()
	if d == nil || int(i/ptrChunk) >= len(*d) {
		return nil
	}
	return (*d)[i/ptrChunk][i%ptrChunk].Load()
}

// store sets slot i, growing the table as needed. The caller holds the
// writers' lock.
func (t *ptrTable[T]) store(i uint32, v *T) {
	d := t.dir.Load()
	var chunks []*[ptrChunk]atomic.Pointer[T]
	if d != nil {
		chunks = *d
	}
	if int(i/ptrChunk) >= len(chunks) {
		if v == nil {
			return // nothing to clear
		}
		grown := make([]*[ptrChunk]atomic.Pointer[T], i/ptrChunk+1)
		copy(grown, chunks)
		for c := len(chunks); c < len(grown); c++ {
			grown[c] = new([ptrChunk]atomic.Pointer[T])
		}
		t.dir.Store(&grown)
		chunks = grown
	}
	chunks[i/ptrChunk][i%ptrChunk].Store(v)
}
