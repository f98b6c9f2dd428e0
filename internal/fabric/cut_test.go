package fabric

import (
	"testing"
	"time"
)

// TestCutThrough: a lone frame that finds its egress port idle (nothing
// queued, the writer free, its class not paused) is written by the
// forwarding goroutine itself; one that finds the writer busy, a queue
// holding frames, its class paused, or a peer with no room, or that
// came in a batch, is queued and left to the tx goroutine, so no
// queue's order changes.
func TestCutThrough(t *testing.T) {
	sw := newBareSwitch(t, SwitchConfig{Ports: 2})
	now := time.Unix(0, 0)
	a, b := macN(1), macN(2)
	sw.inject(2, ethFrame(bcast, b, -1, 0, 60, 0), now) // port 1 learns b
	drain(sw, now)
	eg := &sw.ports[1].eg
	var cut []int // lengths of the frames cut through
	room := true
	eg.setCut(func(f *frame) bool {
		if !room {
			return false
		}
		cut = append(cut, len(f.buf))
		sw.ports[1].sent(f)
		return true
	})
	sw.ports[0].lone = true
	send := func(size int) {
		f := sw.pool.get()
		fr := roceFrame(t, b, a, 26<<2|2, size, 0)
		f.buf = f.buf[:copy(f.buf, fr)]
		sw.receive(sw.ports[0], f, now)
	}
	queued := func() int {
		frames, _, _ := eg.depth()
		n := 0
		for _, v := range frames {
			n += v
		}
		return n
	}
	send(100)
	if len(cut) != 1 || queued() != 0 {
		t.Fatalf("idle port: cut %v, %d queued; want the frame cut through", cut, queued())
	}
	// The tx goroutine holds the writer: the next frames queue behind.
	out := make([]*frame, 8)
	eg.mu.Lock()
	eg.busy = true
	eg.mu.Unlock()
	send(200)
	send(300)
	if len(cut) != 1 || queued() != 2 {
		t.Fatalf("busy writer: cut %v, %d queued; want 2 queued", cut, queued())
	}
	eg.txDone()
	// Frames are queued: a new one goes behind them, not ahead.
	send(400)
	if len(cut) != 1 || queued() != 3 {
		t.Fatalf("queue not empty: cut %v, %d queued; want 3 queued", cut, queued())
	}
	n, _ := eg.take(out, now)
	if n != 3 || len(out[0].buf) >= len(out[1].buf) || len(out[1].buf) >= len(out[2].buf) {
		t.Fatalf("take: %d frames, want 3 in order", n)
	}
	// While take's frames hold the writer, nothing is cut through and a
	// second take returns nothing.
	send(500)
	if m, _ := eg.take(out[n:], now); len(cut) != 1 || m != 0 {
		t.Fatalf("while tx writes: cut %v, take %d", cut, m)
	}
	for _, f := range out[:n] {
		sw.ports[1].sent(f)
	}
	eg.txDone()
	if m, _ := eg.dequeue(out, now); m != 1 {
		t.Fatalf("the frame queued while tx wrote: %d", m)
	}
	sw.release(out[0])
	// A peer without room: queued.
	room = false
	send(600)
	if len(cut) != 1 || queued() != 1 {
		t.Fatalf("no room: cut %v, %d queued", cut, queued())
	}
	drain(sw, now)
	// A paused class: queued.
	room = true
	eg.pause(0xff, time.Second, now)
	send(700)
	if len(cut) != 1 || queued() != 1 {
		t.Fatalf("paused: cut %v, %d queued", cut, queued())
	}
	eg.pause(0xff, 0, now)
	drain(sw, now)
	// A frame that came in a batch with others is queued: the stream
	// keeps its hop's rx and tx goroutines working in parallel.
	sw.ports[0].lone = false
	send(750)
	if len(cut) != 1 || queued() != 1 {
		t.Fatalf("batched: cut %v, %d queued", cut, queued())
	}
	drain(sw, now)
	sw.ports[0].lone = true
	// Without a writer (no session), frames queue as before.
	eg.setCut(nil)
	send(800)
	if len(cut) != 1 || queued() != 1 {
		t.Fatalf("no writer: cut %v, %d queued", cut, queued())
	}
	drain(sw, now)
	for tc := range NumTC {
		if v := sw.ports[0].acct[tc].Load(); v != 0 {
			t.Fatalf("class %d: %d bytes still charged", tc, v)
		}
	}
}
