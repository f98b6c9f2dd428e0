package unixsock

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAccept: a connection is handed to handle while the semaphore has
// room; one beyond it is closed and reported; closing the listener ends
// the loop.
func TestAccept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen("unix", path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var rejected atomic.Int32
	sem := make(chan struct{}, 1)
	handled := make(chan *net.UnixConn)
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Accept(ln, Handshakes{Ctx: context.Background(), WG: &wg, Sem: sem, Rejected: func() { rejected.Add(1) }},
			func(c *net.UnixConn) { handled <- c; <-release; c.Close() })
	}()
	first, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-handled // holds the only handshake slot until release
	second, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection beyond the semaphore was not closed")
	}
	if rejected.Load() != 1 {
		t.Fatalf("rejected %d, want 1", rejected.Load())
	}
	close(release)
	ln.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Accept went on after its listener closed")
	}
	wg.Wait()
}
