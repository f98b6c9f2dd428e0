package fabric

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/shmport"
)

// DialPort connects to a HiSwitch port socket the way an emulated NIC
// (or a switch dialling an inter-switch link) does: it sends hello,
// reads the switch's answer and returns the connection, ready for one
// frame per message, with the answer. An answer with a non-zero status
// is a *HelloError (errors.Is(err, ErrPortBusy) for a busy port) and the
// connection is closed.
func DialPort(ctx context.Context, path string, hello *proto.HelloFields) (*net.UnixConn, proto.Hello, error) {
	h := *hello
	h.Features &^= proto.HelloFeatureShm // a plain socket: no setup follows
	pc, ans, err := DialPortWith(ctx, path, &h, DialOptions{})
	if err != nil {
		return nil, ans, err
	}
	return pc.Conn, ans, nil
}

// DefaultShmEntries is the ring size a dialling port asks for: enough
// slots for a burst of an engine's window at MTU 4096.
const DefaultShmEntries = 512

// DialOptions choose the transport of a dialled port.
type DialOptions struct {
	// Shm offers a shared-memory ring pair (docs/fabric-wire.md); the
	// socket carries the frames when the switch does not take it.
	Shm bool
	// ShmEntries is the slots per ring; default DefaultShmEntries.
	ShmEntries int
	// ShmOptions tune the rings (polling).
	ShmOptions shmport.Options
}

// PortConn is a dialled port: the socket, and the rings when the switch
// took them. With Shm set, frames go through Shm and Conn only says the
// peer is alive (it carries nothing more); closing Conn ends the session.
type PortConn struct {
	Conn *net.UnixConn
	Shm  *shmport.Conn
}

// Transport returns TransportShm or TransportSocket.
func (pc *PortConn) Transport() string {
	if pc.Shm != nil {
		return TransportShm
	}
	return TransportSocket
}

// Close closes the rings and the socket.
func (pc *PortConn) Close() error {
	if pc.Shm != nil {
		pc.Shm.Close()
	}
	return pc.Conn.Close()
}

// DialPortWith is DialPort with a choice of transport: with opts.Shm it
// offers shared memory in the hello and, when the switch takes it, sets
// the rings up before returning.
func DialPortWith(ctx context.Context, path string, hello *proto.HelloFields, opts DialOptions) (*PortConn, proto.Hello, error) {
	h := *hello
	if opts.Shm {
		h.Features |= proto.HelloFeatureShm
	}
	hello = &h
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, nil, fmt.Errorf("fabric: dial %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		uc.SetDeadline(dl)
	} else {
		uc.SetDeadline(time.Now().Add(helloTimeout))
	}
	if _, err := uc.Write(proto.AppendHello(nil, hello)); err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello to %s: %w", path, err)
	}
	buf := make([]byte, proto.HelloMaxSize+1)
	n, _, flags, _, err := uc.ReadMsgUnix(buf, nil)
	if err == nil && n == 0 {
		err = fmt.Errorf("connection closed")
	}
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, err)
	}
	if flags&syscall.MSG_TRUNC != 0 {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, proto.ErrMalformed)
	}
	ans, err := proto.ParseHello(buf[:n])
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, err)
	}
	if ans.Status() != proto.HelloOK {
		uc.Close()
		return nil, ans, &HelloError{Status: ans.Status()}
	}
	pc := &PortConn{Conn: uc}
	if hello.Features&ans.Features()&proto.HelloFeatureShm != 0 {
		entries := opts.ShmEntries
		if entries == 0 {
			entries = DefaultShmEntries
		}
		g := shmport.GeometryFor(entries, int(hello.MaxFrame))
		c, st, err := shmport.Offer(uc, g, opts.ShmOptions)
		if err != nil {
			uc.Close()
			return nil, nil, fmt.Errorf("fabric: shared memory with %s: %w", path, err)
		}
		_ = st // a refusal leaves the frames on the socket
		pc.Shm = c
	}
	if !stop() {
		pc.Close()
		return nil, nil, ctx.Err()
	}
	uc.SetDeadline(time.Time{})
	return pc, ans, nil
}
