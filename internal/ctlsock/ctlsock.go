// Package ctlsock is the control socket of the ivshmem backends
// (`hinic device serve`, `hinic gpu serve`): a UNIX stream socket, mode
// 0660, where each connection gets the backend's status as one JSON
// document and is closed. Listen serves it; Query reads it (`hinic device
// status`, `hinic gpu status`).
//
// ctlsock imports only unixsock of the project, so that both backends
// share it without importing each other (ARCHITECTURE.md §2.7).
package ctlsock

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/unixsock"
)

// writeTimeout bounds the write of one status: a client that does not
// read cannot hold the server, nor its Close.
const writeTimeout = 5 * time.Second

// Server serves a status on a control socket until Close. Safe for
// concurrent use.
type Server struct {
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

// Listen listens on path and answers every connection with status(),
// which is called from the server's goroutine. who names the backend in
// errors ("gpu").
func Listen[S any](path, who string, status func() S) (*Server, error) {
	ln, err := unixsock.Listen("unix", path, 0o660)
	if err != nil {
		return nil, fmt.Errorf("%s: control socket: %w", who, err)
	}
	s := &Server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetWriteDeadline(time.Now().Add(writeTimeout))
			_ = json.NewEncoder(c).Encode(status())
			c.Close()
		}
	}()
	return s, nil
}

// Close stops serving, removes the socket file and waits for the
// server's goroutine. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

// Query reads the status of the backend serving on path. who names the
// backend in errors and serve the command that runs it, the hint when
// none answers.
func Query[S any](ctx context.Context, path, who, serve string) (S, error) {
	var st S
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return st, fmt.Errorf("%s: control socket %s: %w (is `%s` running?)", who, path, err, serve)
	}
	defer c.Close()
	if err := json.NewDecoder(c).Decode(&st); err != nil {
		var zero S
		return zero, fmt.Errorf("%s: status from %s: %w", who, path, err)
	}
	return st, nil
}

// The states of a backend's device in its status.
const (
	StateWaiting = "waiting" // no guest connected
	StateReady   = "ready"   // a guest connected, its driver not live yet
	StateLive    = "live"    // the driver's handshake done
	StateFatal   = "fatal"   // the device went fatal; a reset brings it back
)

// GuestState is the state of a device that has a guest, from the
// dev_status word of its device header and the bits of its ABI for live
// and fatal; code is the header's fatal_code, read only when fatal.
func GuestState(devStatus, fatalCode *uint32, liveBit, fatalBit uint32) (state string, code uint32) {
	ds := atomic.LoadUint32(devStatus)
	switch {
	case ds&fatalBit != 0:
		return StateFatal, atomic.LoadUint32(fatalCode)
	case ds&liveBit != 0:
		return StateLive, 0
	}
	return StateReady, 0
}
