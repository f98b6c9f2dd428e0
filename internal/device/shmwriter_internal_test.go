package device

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/shmport"
)

// testFrame is frame i: its number, then filler.
func testFrame(i int) []byte {
	b := make([]byte, 100+i%900)
	binary.BigEndian.PutUint32(b, uint32(i))
	for j := 4; j < len(b); j++ {
		b[j] = byte(i + j)
	}
	return b
}

// TestShmWriterBacklog: the writer never waits. Past a full ring it
// keeps frames, in order, and its drain goroutine sends them once the
// switch's side consumes, calling ready as the backlog shrinks; frames
// sent meanwhile go behind the kept ones. Past maxShmBacklog it drops
// and counts; a ring that fails with frames kept counts them lost too.
func TestShmWriterBacklog(t *testing.T) {
	g := shmport.Geometry{Entries: 16, BufSize: 1024}
	a, b, err := shmport.Pair(g, shmport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	var lost atomic.Uint64
	w := &shmWriter{c: a, lost: &lost}
	var readies atomic.Int32
	ready := func() { readies.Add(1) }

	// Three rings' worth, sent while nobody reads: none of it waits.
	const n = 48
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if err := w.send(testFrame(i), ready); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
		if err := w.flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("send waited for a full ring")
	}
	if k := w.backlog(); k != n-int(g.Entries) {
		t.Fatalf("backlog %d, want %d", k, n-int(g.Entries))
	}
	next := 0
	check := func(fs [][]byte) {
		for _, f := range fs {
			if want := testFrame(next); string(f) != string(want) {
				t.Errorf("frame %d differs (got number %d)", next, binary.BigEndian.Uint32(f))
			}
			next++
		}
	}
	for next < n {
		if _, _, err := b.Recv(64, check); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.backlog() != 0 || readies.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d, %d readies after the ring was drained", w.backlog(), readies.Load())
		}
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	draining := w.draining
	w.mu.Unlock()
	if draining {
		t.Fatal("still draining with nothing kept")
	}
	// With the backlog gone, frames go straight into the ring again.
	if err := w.send(testFrame(n), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Recv(64, check); err != nil || next != n+1 {
		t.Fatalf("after the drain: %d frames, %v", next, err)
	}

	// Overflow: a full ring and maxShmBacklog kept; the next is lost.
	for i := range int(g.Entries) + maxShmBacklog {
		if err := w.send(testFrame(i), nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := w.send(testFrame(0), nil); !errors.Is(err, errShmBacklog) || lost.Load() != 1 {
		t.Fatalf("send past the backlog: %v, %d lost; want errShmBacklog, 1", err, lost.Load())
	}
	// The ring fails: what is kept is lost, and counted.
	a.Shutdown()
	deadline = time.Now().Add(10 * time.Second)
	for w.backlog() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d after the ring failed", w.backlog())
		}
		time.Sleep(time.Millisecond)
	}
	if got := lost.Load(); got != 1+maxShmBacklog {
		t.Fatalf("%d lost, want %d", got, 1+maxShmBacklog)
	}
	if err := w.send(testFrame(1), nil); !errors.Is(err, shmport.ErrClosed) {
		t.Fatalf("send on a failed ring: %v, want ErrClosed", err)
	}
}
