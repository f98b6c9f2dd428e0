package hilink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// ErrRefused is returned by Dial when the switch refuses the hello; the
// error names the status.
var ErrRefused = errors.New("hilink: hello refused")

// ErrEndpointClosed is returned by an Endpoint's calls after it ended.
var ErrEndpointClosed = errors.New("hilink: endpoint closed")

// EndpointConfig is the GPU side of a port.
type EndpointConfig struct {
	// Path is the switch port's socket.
	Path string
	// GPUs are the GPU ids behind the port (1..wire.MaxHelloGPUs).
	GPUs []uint16
	// Credits are the frames the endpoint buffers for the application
	// (its grant to the switch). Default DefaultCredits.
	Credits int
	// MaxFrame is the largest frame the endpoint accepts. Default
	// DefaultMaxFrame.
	MaxFrame int
	// Name is shown by `hinic link status`.
	Name string
}

// Endpoint is a port's GPU end: it says hello, keeps the credits of both
// directions and moves whole frames. Send may be called from several
// goroutines, as may Recv; one reader goroutine owns the socket's read
// side.
type Endpoint struct {
	c        *net.UnixConn
	port     int
	maxFrame int // the switch's
	grant    int

	tokens chan struct{} // one per credit the switch granted
	rx     chan []byte   // received data frames, at most grant
	// peerAvail are the credits the switch holds: the grant, less the
	// frames received, plus the credits returned (counted before the
	// switch can see them).
	peerAvail atomic.Int64
	done      chan struct{}
	once      sync.Once
	wg        sync.WaitGroup

	wmu        sync.Mutex // serializes writes and guards unreturned
	unreturned int
	credit     []byte

	emu sync.Mutex
	err error
}

// Dial opens a port: it connects, sends the hello and waits for the
// answer (bounded by ctx, and by 5 s).
func Dial(ctx context.Context, cfg EndpointConfig) (*Endpoint, error) {
	if cfg.Credits == 0 {
		cfg.Credits = DefaultCredits
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.Credits < 1 || cfg.Credits > wire.MaxCredits {
		return nil, fmt.Errorf("hilink: credits %d: want 1..%d", cfg.Credits, wire.MaxCredits)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("hilink: dial %s: %w", cfg.Path, err)
	}
	c := nc.(*net.UnixConn)
	c.SetReadBuffer(socketBuffer)
	c.SetWriteBuffer(socketBuffer)
	dl := time.Now().Add(helloTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	c.SetDeadline(dl)
	hello := wire.AppendHelloFrame(nil, 0, uint16(cfg.Credits), &wire.HelloFields{
		MaxFrame: uint32(cfg.MaxFrame), Role: wire.RoleGPU, GPUs: cfg.GPUs, Name: cfg.Name})
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("hilink: hello to %s: %w", cfg.Path, err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("hilink: hello from %s: %w", cfg.Path, err)
	}
	h, err := wire.Parse(buf[:n])
	if err != nil || h.Type() != wire.TypeHello {
		c.Close()
		return nil, fmt.Errorf("hilink: hello from %s: not a hello (%v)", cfg.Path, err)
	}
	if st := h.Status(); st != wire.StatusOK {
		c.Close()
		return nil, fmt.Errorf("%w by %s: status %d", ErrRefused, cfg.Path, st)
	}
	ans, err := wire.ParseHello(h.Payload())
	if err != nil || h.Credits() == 0 {
		c.Close()
		return nil, fmt.Errorf("hilink: hello from %s: malformed", cfg.Path)
	}
	c.SetDeadline(time.Time{})
	e := &Endpoint{c: c, port: int(ans.PortNum()), maxFrame: int(ans.MaxFrame()), grant: cfg.Credits,
		tokens: make(chan struct{}, wire.MaxCredits), rx: make(chan []byte, cfg.Credits),
		done: make(chan struct{}), credit: make([]byte, wire.HeaderSize)}
	if !e.addTokens(int(h.Credits())) {
		c.Close()
		return nil, fmt.Errorf("hilink: hello from %s: bad credits", cfg.Path)
	}
	e.peerAvail.Store(int64(cfg.Credits))
	e.wg.Add(1)
	go e.readLoop(cfg.MaxFrame)
	return e, nil
}

// Port returns the switch port number.
func (e *Endpoint) Port() int { return e.port }

// MaxFrame returns the largest frame the switch takes.
func (e *Endpoint) MaxFrame() int { return e.maxFrame }

func (e *Endpoint) addTokens(n int) bool {
	for range n {
		select {
		case e.tokens <- struct{}{}:
		default:
			return false
		}
	}
	return true
}

func (e *Endpoint) fail(err error) {
	e.emu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.emu.Unlock()
	e.once.Do(func() {
		close(e.done)
		e.c.Close()
	})
}

// Err returns why the endpoint ended, or nil.
func (e *Endpoint) Err() error {
	e.emu.Lock()
	defer e.emu.Unlock()
	return e.err
}

func (e *Endpoint) readLoop(maxFrame int) {
	defer e.wg.Done()
	buf := make([]byte, maxFrame)
	for {
		n, _, flags, _, err := e.c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			e.fail(ErrEndpointClosed)
			return
		}
		h, err := wire.Parse(buf[:n])
		if err != nil || flags&syscall.MSG_TRUNC != 0 {
			e.fail(fmt.Errorf("hilink: bad frame from the switch: %v", err))
			return
		}
		if !e.addTokens(int(h.Credits())) {
			e.fail(errors.New("hilink: the switch returned more credits than it granted"))
			return
		}
		if h.Type() == wire.TypeCredit {
			continue
		}
		if e.peerAvail.Add(-1) < 0 || h.Type() == wire.TypeHello {
			e.fail(errors.New("hilink: the switch overran its credits"))
			return
		}
		// Never blocks: the channel holds the whole grant.
		e.rx <- append([]byte(nil), buf[:n]...)
	}
}

// Send sends one frame (a data frame built with package wire), waiting
// for a credit. It writes the frame's Credits field.
func (e *Endpoint) Send(ctx context.Context, frame []byte) error {
	select {
	case <-e.tokens:
	case <-e.done:
		return e.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	wire.Header(frame).SetCredits(uint16(e.unreturned))
	e.peerAvail.Add(int64(e.unreturned))
	if _, err := e.c.Write(frame); err != nil {
		e.fail(err)
		return err
	}
	e.unreturned = 0
	return nil
}

// Recv returns the next data frame and gives its credit back to the
// switch: at once when no other frame waits, else with every eighth of
// the grant, or with the next Send.
func (e *Endpoint) Recv(ctx context.Context) ([]byte, error) {
	var f []byte
	select {
	case f = <-e.rx:
	case <-e.done:
		// Frames already received are still handed out.
		select {
		case f = <-e.rx:
			return f, nil
		default:
		}
		return nil, e.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.unreturned++
	if len(e.rx) == 0 || e.unreturned >= max(1, e.grant/8) {
		wire.Header(e.credit).Encode(&wire.Fields{Type: wire.TypeCredit, Credits: uint16(e.unreturned)})
		e.peerAvail.Add(int64(e.unreturned))
		if _, err := e.c.Write(e.credit); err != nil {
			e.fail(err)
			return f, nil
		}
		e.unreturned = 0
	}
	return f, nil
}

// Close ends the endpoint and waits for its reader. Idempotent.
func (e *Endpoint) Close() error {
	e.fail(ErrEndpointClosed)
	e.wg.Wait()
	return nil
}
