package ivshmem

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestDevice: a Device set up on a connection is what the peer sees
// (BAR2 shared, eventfds each way), and Wait reports doorbells and extra
// eventfds by index until Stop.
func TestDevice(t *testing.T) {
	const vectors = 3
	d, err := NewDevice("test", 1<<16, vectors, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.SHM) != 1<<16 || len(d.DB) != vectors || len(d.IRQ) != vectors || len(d.Extra) != 2 || len(d.Events()) != vectors+3 {
		t.Fatalf("device: shm %d, %d doorbells, %d vectors, %d extra", len(d.SHM), len(d.DB), len(d.IRQ), len(d.Extra))
	}
	p := connect(t, vectors, func(c *net.UnixConn) error { return d.Setup(c, 5) })
	d.SHM[9] = 7
	if p.ID != 5 || p.SHM[9] != 7 {
		t.Fatalf("peer %d sees %d", p.ID, p.SHM[9])
	}
	events := d.Events()
	wait := func(want int) {
		t.Helper()
		n, ok := d.Wait(events)
		if !ok || n != 1 || int(events[0].Fd) != want {
			t.Fatalf("Wait: %d events %v, ok %v; want fd index %d", n, events[:n], ok, want)
		}
	}
	p.Ring(2)
	wait(2)
	if !Drain(d.DB[2]) {
		t.Error("Wait drained the doorbell")
	}
	Signal(d.Extra[1])
	wait(vectors + 2)
	Drain(d.Extra[1])
	Signal(d.IRQ[0])
	if n := p.WaitIRQ(0, time.Second); n != 1 {
		t.Errorf("interrupt: %d", n)
	}
	p.Ring(0)
	Signal(d.Stop)
	if _, ok := d.Wait(events); ok {
		t.Error("Wait went on after Stop")
	}
}

func TestNextPeerID(t *testing.T) {
	for id, want := range map[int]int{1: 2, 0x7fff: 0x8000, 0xfffe: 0xffff, 0xffff: 1} {
		if got := NextPeerID(id); got != want {
			t.Errorf("NextPeerID(%#x) = %#x, want %#x", id, got, want)
		}
	}
}

// TestDialDevice: a BAR2 smaller than the device header is an error,
// one that holds it is not.
func TestDialDevice(t *testing.T) {
	for _, tc := range []struct {
		hdr int
		ok  bool
	}{{4096, true}, {4097, false}} {
		d, err := NewDevice("test", 4096, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := connectWith(t, func(ctx context.Context, sock string) (*Peer, error) { return DialDevice(ctx, sock, 2, tc.hdr) },
			func(c *net.UnixConn) error { return d.Setup(c, 1) })
		if ok := err == nil; ok != tc.ok || (ok && len(p.SHM) != 4096) {
			t.Errorf("header of %d bytes in a 4096-byte BAR2: err %v", tc.hdr, err)
		}
		d.Close()
	}
}

// TestDeviceWaitParks: Wait waits in Go's poller (the epoll set is
// pollable there, so its file takes a deadline), and a waiter that
// parked before the doorbell rang wakes for it, ring after ring, each
// doorbell drained before the next.
func TestDeviceWaitParks(t *testing.T) {
	d, err := NewDevice("test", 1<<16, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.ep.SetReadDeadline(time.Time{}); err != nil {
		t.Fatalf("the epoll set is not in Go's poller: %v", err)
	}
	events := d.Events()
	got := make(chan int)
	go func() {
		defer close(got)
		for {
			n, ok := d.Wait(events)
			if !ok {
				return
			}
			for _, ev := range events[:n] {
				Drain(d.DB[ev.Fd])
				got <- int(ev.Fd)
			}
		}
	}()
	for i := range 1000 {
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let the waiter park
		}
		Signal(d.DB[i%2])
		select {
		case fd := <-got:
			if fd != i%2 {
				t.Fatalf("ring %d: doorbell %d reported, want %d", i, fd, i%2)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ring %d: the waiter did not wake", i)
		}
	}
	Signal(d.Stop)
	select {
	case _, open := <-got:
		if open {
			t.Fatal("an event after Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait went on after Stop")
	}
}
