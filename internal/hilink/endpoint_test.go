package hilink

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// fakeSwitch listens on a port socket, answers one hello with grant
// credits and then sends msgs, to check that an Endpoint does not trust
// the switch either.
func fakeSwitch(t *testing.T, grant uint16, msgs ...[]byte) string {
	dir, err := os.MkdirTemp("", "hle")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "p.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 512)); err != nil {
			return
		}
		c.Write(wire.AppendHelloFrame(nil, wire.StatusOK, grant, &wire.HelloFields{MaxFrame: 4096, Role: wire.RoleSwitch, PortNum: 3}))
		for _, m := range msgs {
			c.Write(m)
		}
		c.Read(make([]byte, 512)) // until the endpoint closes
	}()
	return path
}

func TestEndpointDistrustsTheSwitch(t *testing.T) {
	data := write(1, 0, 0, 8)
	for _, tc := range []struct {
		name string
		msgs [][]byte
		want string
	}{
		{"overrun", [][]byte{data, data, data}, "overran"},
		{"credit overflow", [][]byte{wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: wire.MaxCredits}, nil),
			wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: wire.MaxCredits}, nil)}, "more credits"},
		{"malformed", [][]byte{{0x13, 0, 0}}, "bad frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e, err := Dial(ctx, EndpointConfig{Path: fakeSwitch(t, 1, tc.msgs...), GPUs: []uint16{0}, Credits: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Port() != 3 || e.MaxFrame() != 4096 {
				t.Errorf("port %d, max frame %d", e.Port(), e.MaxFrame())
			}
			waitFor(t, "the endpoint to fail", func() bool { return e.Err() != nil })
			// The frames within the grant are still handed out; then the error.
			var err2 error
			for range 3 {
				if _, err2 = e.Recv(ctx); err2 != nil {
					break
				}
			}
			if err2 == nil || !strings.Contains(err2.Error(), tc.want) {
				t.Errorf("err %v, want %q", err2, tc.want)
			}
		})
	}
}

func TestEndpointRefused(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 1})
	dial(t, sw, 0, 0, 0)
	_, err := Dial(ctxT(t), EndpointConfig{Path: PortPath(sw.cfg.RunDir, 0), GPUs: []uint16{1}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "status 3") {
		t.Errorf("busy port: %v", err)
	}
	if _, err := Dial(ctxT(t), EndpointConfig{Path: PortPath(sw.cfg.RunDir, 0), GPUs: []uint16{1}, Credits: wire.MaxCredits + 1}); err == nil {
		t.Error("a grant above MaxCredits accepted")
	}
}
