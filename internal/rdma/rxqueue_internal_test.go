package rdma

import (
	"testing"
	"time"
)

// rxTestEngine is an engine with a receive queue of capacity and no
// goroutine draining it: the test pops.
func rxTestEngine(capacity int, wait time.Duration) *engine {
	d := &Device{cfg: DeviceConfig{RxQueueLen: capacity, RxWait: wait}}
	d.eng.init(d)
	return &d.eng
}

func waitWaiters(t *testing.T, q *rxQueue, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		q.mu.Lock()
		w := q.waiters
		q.mu.Unlock()
		if w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", w, n)
		}
	}
}

func TestRxQueueOrderAndWrap(t *testing.T) {
	e := rxTestEngine(4, -1)
	var out [8]*frameBuf
	for round := range 5 { // the ring wraps
		in := []*frameBuf{{n: round*10 + 1}, {n: round*10 + 2}, {n: round*10 + 3}}
		e.enqueue(in)
		if e.rx.len() != 3 {
			t.Fatalf("round %d: %d queued", round, e.rx.len())
		}
		k := e.rx.pop(out[:])
		if k != 3 || out[0].n != round*10+1 || out[1].n != round*10+2 || out[2].n != round*10+3 || e.rx.len() != 0 {
			t.Fatalf("round %d: popped %d: %v %v %v", round, k, out[0], out[1], out[2])
		}
	}
	if d := e.d.ctr.rxDropped.Load(); d != 0 {
		t.Errorf("%d dropped", d)
	}
}

// TestRxQueueFullWaits: a batch larger than the room left waits for a
// drain and then goes on in order; two goroutines waiting both wake.
func TestRxQueueFullWaits(t *testing.T) {
	e := rxTestEngine(2, 10*time.Second)
	done := make(chan struct{})
	go func() {
		e.enqueue([]*frameBuf{{n: 1}, {n: 2}, {n: 3}})
		close(done)
	}()
	waitWaiters(t, &e.rx, 1)
	var out [4]*frameBuf
	if k := e.rx.pop(out[:1]); k != 1 || out[0].n != 1 {
		t.Fatalf("popped %d, %v", k, out[0])
	}
	<-done
	if k := e.rx.pop(out[:]); k != 2 || out[0].n != 2 || out[1].n != 3 {
		t.Fatalf("popped %d: %v %v", k, out[0], out[1])
	}

	e.enqueue([]*frameBuf{{n: 4}, {n: 5}}) // full
	waiters := make(chan struct{}, 2)
	for i := range 2 {
		go func() {
			e.enqueue([]*frameBuf{{n: 6 + i}})
			waiters <- struct{}{}
		}()
	}
	waitWaiters(t, &e.rx, 2)
	if k := e.rx.pop(out[:]); k != 2 {
		t.Fatalf("popped %d", k)
	}
	<-waiters
	<-waiters
	if e.rx.len() != 2 || e.d.ctr.rxDropped.Load() != 0 {
		t.Fatalf("%d queued, %d dropped", e.rx.len(), e.d.ctr.rxDropped.Load())
	}
}

// TestRxQueueFullDrops: with no drain, the frames that find no room are
// dropped after RxWait (at once when RxWait is negative), counted, and
// their buffers go back to the free list.
func TestRxQueueFullDrops(t *testing.T) {
	for _, wait := range []time.Duration{-1, time.Millisecond} {
		e := rxTestEngine(1, wait)
		e.enqueue([]*frameBuf{{n: 1}, {n: 2}, {n: 3}})
		if e.rx.len() != 1 || e.d.ctr.rxDropped.Load() != 2 || len(e.rx.free) != 2 {
			t.Errorf("wait %v: %d queued, %d dropped, %d free", wait, e.rx.len(), e.d.ctr.rxDropped.Load(), len(e.rx.free))
		}
		e.rx.mu.Lock()
		w := e.rx.waiters
		e.rx.mu.Unlock()
		if w != 0 {
			t.Errorf("wait %v: %d waiters left", wait, w)
		}
	}
}

// TestDeliverBatchOversize: DeliverBatch copies each frame into its own
// buffer, in order, and counts a frame over the largest as malformed.
func TestDeliverBatchOversize(t *testing.T) {
	e := rxTestEngine(256, -1)
	frames := make([][]byte, 0, 150)
	for i := range 150 { // more than a chunk
		n := 60 + i
		if i == 70 {
			n = maxFrameSize + 1
		}
		frames = append(frames, make([]byte, n))
	}
	e.d.DeliverBatch(frames)
	if e.rx.len() != 149 || e.d.ctr.rxMalformed.Load() != 1 {
		t.Fatalf("%d queued, %d malformed", e.rx.len(), e.d.ctr.rxMalformed.Load())
	}
	out := make([]*frameBuf, 200)
	k := e.rx.pop(out)
	want := 60
	for i := range k {
		if want == 60+70 {
			want++
		}
		if out[i].n != want || out[i].raw {
			t.Fatalf("frame %d: %d bytes (raw %v), want %d", i, out[i].n, out[i].raw, want)
		}
		want++
	}
}
