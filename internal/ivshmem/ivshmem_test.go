package ivshmem

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// connect dials a server that runs setup on the connection, and returns
// the peer once both ends are done; the peer closes when the test ends.
func connect(t *testing.T, vectors int, setup func(*net.UnixConn) error) *Peer {
	t.Helper()
	p, err := connectWith(t, func(ctx context.Context, sock string) (*Peer, error) { return Dial(ctx, sock, vectors) }, setup)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// connectWith is connect with the dial given; it returns dial's error.
func connectWith(t *testing.T, dial func(context.Context, string) (*Peer, error), setup func(*net.UnixConn) error) (*Peer, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ivs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			done <- err
			return
		}
		done <- setup(c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := dial(ctx, sock)
	if err != nil {
		<-done
		return nil, err
	}
	t.Cleanup(func() { p.Close() })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return p, nil
}

// TestSetupDial: what Setup sends, Dial receives as QEMU would: the peer
// ID, the shared memory (mapped, writes visible both ways) and the
// eventfds each way.
func TestSetupDial(t *testing.T) {
	const vectors = 3
	shmFD, shm, err := NewSharedMemory("test", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	db, err := NewEventfds(vectors)
	if err != nil {
		t.Fatal(err)
	}
	irq, err := NewEventfds(vectors)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFDs(append(append(db, irq...), shmFD))
	p := connect(t, vectors, func(c *net.UnixConn) error { return Setup(c, 7, shmFD, db, irq) })
	if p.ID != 7 || len(p.SHM) != 1<<16 || len(p.DB) != vectors || len(p.IRQ) != vectors {
		t.Fatalf("peer %d, shm %d, %d doorbells, %d vectors", p.ID, len(p.SHM), len(p.DB), len(p.IRQ))
	}
	shm[100] = 42
	if p.SHM[100] != 42 {
		t.Error("shared memory not shared")
	}
	if Drain(db[1]) {
		t.Error("doorbell set before it was rung")
	}
	p.Ring(1)
	if !Drain(db[1]) || Drain(db[0]) {
		t.Error("doorbell 1 did not reach the backend's eventfd 1 alone")
	}
	if n := p.WaitIRQ(2, 0); n != 0 {
		t.Errorf("interrupt %d before one was raised", n)
	}
	Signal(irq[2])
	Signal(irq[2])
	if n := p.WaitIRQ(2, time.Second); n != 2 {
		t.Errorf("WaitIRQ read %d, want 2", n)
	}
}
