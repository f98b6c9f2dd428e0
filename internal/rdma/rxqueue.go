package rdma

import (
	"sync"
	"sync/atomic"
)

// rxQueue is the engine's receive queue and its free list of frame
// buffers: a bounded FIFO that Deliver fills and the run lock's holder
// drains, under one mutex taken once per batch on both sides (a channel
// costs a lock per frame and per buffer). A full queue is waited on
// through room, a channel that the drainer closes (and replaces) when it
// makes room for waiters, so every waiter wakes.
type rxQueue struct {
	mu      sync.Mutex
	ring    []*frameBuf // capacity: RxQueueLen
	head, n int
	free    []*frameBuf // at most maxFree
	maxFree int
	waiters int
	room    chan struct{}
	length  atomic.Int32 // n, for peeks without the lock
}

func (q *rxQueue) init(capacity int) {
	q.ring = make([]*frameBuf, capacity)
	q.maxFree = capacity + rxBatch
	q.free = make([]*frameBuf, 0, q.maxFree)
	q.room = make(chan struct{})
}

// len is the frames queued, read without the lock.
func (q *rxQueue) len() int { return int(q.length.Load()) }

// get returns a free buffer, or a new one.
func (q *rxQueue) get() *frameBuf {
	var one [1]*frameBuf
	q.getN(one[:])
	return one[0]
}

// getN fills bufs with free buffers (new ones when the list runs out).
func (q *rxQueue) getN(bufs []*frameBuf) {
	q.mu.Lock()
	i := 0
	for ; i < len(bufs); i++ {
		if bufs[i] = q.popFreeLocked(); bufs[i] == nil {
			break
		}
	}
	q.mu.Unlock()
	for ; i < len(bufs); i++ {
		bufs[i] = new(frameBuf)
	}
}

func (q *rxQueue) popFreeLocked() *frameBuf {
	n := len(q.free)
	if n == 0 {
		return nil
	}
	b := q.free[n-1]
	q.free[n-1] = nil
	q.free = q.free[:n-1]
	b.raw = false
	return b
}

// put returns buffers to the free list; what it cannot hold goes to the
// garbage collector.
func (q *rxQueue) put(bufs ...*frameBuf) {
	q.mu.Lock()
	for _, b := range bufs {
		if len(q.free) < q.maxFree {
			q.free = append(q.free, b)
		}
	}
	q.mu.Unlock()
}

// push queues as many of bufs as there is room for, in order, and
// returns how many. When it cannot queue them all it also returns the
// channel that is closed when a drain makes room.
func (q *rxQueue) push(bufs []*frameBuf) (int, <-chan struct{}) {
	q.mu.Lock()
	c := len(q.ring)
	i := 0
	for ; i < len(bufs) && q.n < c; i++ {
		q.ring[(q.head+q.n)%c] = bufs[i]
		q.n++
	}
	q.length.Store(int32(q.n))
	var room <-chan struct{}
	if i < len(bufs) {
		q.waiters++
		room = q.room
	}
	q.mu.Unlock()
	return i, room
}

// doneWaiting ends a wait that push started.
func (q *rxQueue) doneWaiting() {
	q.mu.Lock()
	q.waiters--
	q.mu.Unlock()
}

// pop takes up to len(bufs) frames off the queue, oldest first, and
// wakes those waiting for room.
func (q *rxQueue) pop(bufs []*frameBuf) int {
	q.mu.Lock()
	k := min(len(bufs), q.n)
	c := len(q.ring)
	for i := range k {
		bufs[i] = q.ring[q.head]
		q.ring[q.head] = nil
		q.head = (q.head + 1) % c
	}
	q.n -= k
	q.length.Store(int32(q.n))
	if k > 0 && q.waiters > 0 {
		close(q.room)
		q.room = make(chan struct{})
	}
	q.mu.Unlock()
	return k
}
