package shmport

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// localPair sets a ring pair up through Offer and Accept over a socket
// pair of this process, as the embedded rack does.
func localPair(t *testing.T, opt Options) (dialler, acceptor *Conn) {
	t.Helper()
	d, s := seqpacketPair(t)
	type res struct {
		c  *Conn
		st uint16
		e  error
	}
	ch := make(chan res, 1)
	go func() {
		c, st, err := Accept(s, 1<<30, 4096, opt)
		ch <- res{c, st, err}
	}()
	dc, st, err := Offer(d, testGeo, opt)
	if err != nil || st != StatusOK {
		t.Fatalf("Offer: %s, %v", StatusText(st), err)
	}
	r := <-ch
	if r.e != nil || r.st != StatusOK {
		t.Fatalf("Accept: %s, %v", StatusText(r.st), r.e)
	}
	t.Cleanup(func() { dc.Close(); r.c.Close() })
	return dc, r.c
}

// eventfdEmpty reports whether nothing was written to the eventfd f.
func eventfdEmpty(t *testing.T, c *Conn, which string) bool {
	t.Helper()
	files := map[string]interface {
		Read([]byte) (int, error)
		SetReadDeadline(time.Time) error
	}{"rxData": c.rxData, "rxSpace": c.rxSpace, "txData": c.txData, "txSpace": c.txSpace}
	f := files[which]
	f.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [8]byte
	_, err := f.Read(b[:])
	f.SetReadDeadline(time.Time{})
	return err != nil
}

// TestLocalWake: both sides of a pair made in one process kick and sleep
// through channels, not eventfds: a sleeping consumer wakes for a frame,
// a producer waiting on a full ring wakes when the consumer frees slots,
// and Shutdown wakes a sleeper.
func TestLocalWake(t *testing.T) {
	a, b := localPair(t, Options{})
	if !a.Local() || !b.Local() {
		t.Fatalf("Local: dialler %v, acceptor %v; want both", a.Local(), b.Local())
	}
	// The consumer sleeps first (polling is off), then a frame wakes it.
	got := make(chan error, 1)
	go func() {
		_, _, err := b.Recv(1, func([][]byte) {})
		got <- err
	}()
	for b.Stats().Sleeps == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := a.Send(frameOf(1, 64)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if a.Stats().Kicks == 0 {
		t.Fatal("the send woke no one")
	}
	if !eventfdEmpty(t, b, "rxData") {
		t.Fatal("a local kick went through the eventfd")
	}

	// Fill the ring; the next Send waits for space until b takes frames.
	for i := range int(testGeo.Entries) {
		if err := a.Send(frameOf(i, 64)); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- a.Send(frameOf(99, 64)) }()
	for a.Stats().Sleeps == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	if _, _, err := b.Recv(8, func([][]byte) {}); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("Send after space: %v", err)
	}

	// Drain, then a sleeping Recv ends with ErrClosed on Shutdown.
	for n := 0; n < int(testGeo.Entries)+1-8; {
		k, _, err := b.Recv(64, func([][]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	sleeps := b.Stats().Sleeps
	go func() {
		_, _, err := b.Recv(1, func([][]byte) {})
		got <- err
	}()
	for b.Stats().Sleeps == sleeps {
		time.Sleep(100 * time.Microsecond)
	}
	b.Shutdown()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after Shutdown: %v, want ErrClosed", err)
	}
}

// TestLocalClaim: an offer is claimed at most once and never outlives
// the setup, and a region nobody here registered is not local.
func TestLocalClaim(t *testing.T) {
	r, err := create(testGeo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if w := claimLocal(r.fds[FdRegion]); w != nil {
		t.Fatal("claimed a region nobody offered")
	}
	id, w := registerLocal(r.fds[FdRegion])
	if w == nil {
		t.Fatal("no registration")
	}
	if claimLocal(r.fds[FdRegion]) != w {
		t.Fatal("first claim failed")
	}
	if claimLocal(r.fds[FdRegion]) != nil {
		t.Fatal("second claim succeeded")
	}
	if settleLocal(id, w) != w {
		t.Fatal("the dialler does not see the claim")
	}
	// Unclaimed: the dialler withdraws it and stays on the eventfds.
	id, w = registerLocal(r.fds[FdRegion])
	if settleLocal(id, w) != nil {
		t.Fatal("an unclaimed offer came back as local")
	}
	if claimLocal(r.fds[FdRegion]) != nil {
		t.Fatal("a withdrawn offer was claimed")
	}
	localRegions.mu.Lock()
	n := len(localRegions.m)
	localRegions.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d registrations left behind", n)
	}
	// Pair (the eventfd path's tests) is not local.
	a, b := testPair(t)
	if a.Local() || b.Local() {
		t.Fatal("Pair made local conns")
	}
	var fds [2]int
	if err := unix.Pipe(fds[:]); err == nil { // a descriptor that is no memfd
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if claimLocal(fds[0]) != nil {
			t.Fatal("claimed a pipe")
		}
	}
}
