// Package unixsock opens the UNIX sockets that HiNIC's servers listen on
// (fabric ports and control sockets, the device backend's ivshmem and
// control sockets) the one safe way: a socket file that is already there
// is replaced only when it is stale (nobody accepts on it), never when a
// live process serves it and never when the path is not a socket, so that
// a second server cannot silently steal the path of a running one and a
// planted file or symlink is not deleted. The socket then gets its mode.
//
// It also has the accept loop those servers share (Accept).
//
// unixsock imports only the standard library.
package unixsock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrInUse is returned when another process serves the socket.
var ErrInUse = errors.New("another process serves this socket")

// staleProbe bounds the dial that tells a live socket from a stale one.
const staleProbe = time.Second

// Listen listens on path ("unix" for SOCK_STREAM, "unixpacket" for
// SOCK_SEQPACKET) and sets the socket file's mode. Closing the listener
// unlinks the file.
func Listen(network, path string, mode fs.FileMode) (*net.UnixListener, error) {
	if err := removeStale(network, path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix(network, &net.UnixAddr{Name: path, Net: network})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: chmod: %w", path, err)
	}
	return ln, nil
}

// removeStale removes path if it is a socket that nobody accepts on.
func removeStale(network, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("listen %s: exists and is not a socket (%s); remove it by hand if it is yours", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout(network, path, staleProbe)
	if err == nil {
		c.Close()
		return fmt.Errorf("listen %s: %w (stop it, or choose another run directory)", path, ErrInUse)
	}
	// Only a refused connection proves the socket stale; a socket of
	// another type (EPROTOTYPE) or one we may not reach is left alone.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("listen %s: cannot tell whether it is stale: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("listen %s: remove stale socket: %w", path, err)
	}
	return nil
}

// Handshakes is what Accept needs of a server: its context, the
// goroutines it waits for, and a semaphore whose capacity bounds the
// connections being set up at once.
type Handshakes struct {
	Ctx context.Context
	WG  *sync.WaitGroup
	Sem chan struct{}
	// Rejected, when set, is told of each connection closed because
	// Sem was full.
	Rejected func()
}

// Accept takes connections on ln until it is closed (or, after an
// error such as EMFILE, the context ends) and runs handle on each in
// a goroutine of its own, counted in h.WG, while h.Sem has room; a
// connection beyond that is closed at once. After an accept error
// other than closure it waits 50 ms rather than spin. Run it in a
// goroutine the caller counts.
func Accept(ln *net.UnixListener, h Handshakes, handle func(*net.UnixConn)) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-h.Ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case h.Sem <- struct{}{}:
		default:
			if h.Rejected != nil {
				h.Rejected()
			}
			c.Close() // too many handshakes at once
			continue
		}
		h.WG.Add(1)
		go func() {
			defer h.WG.Done()
			defer func() { <-h.Sem }()
			handle(c)
		}()
	}
}
