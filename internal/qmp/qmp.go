// Package qmp is a small client of the QEMU Machine Protocol: JSON
// messages, one per line, over QEMU's -qmp UNIX socket (QEMU's
// docs/interop/qmp-spec.rst). It reads the greeting, leaves capability
// negotiation with qmp_capabilities, runs commands and waits for
// events. The host uses it to give a running guest a new PCI function
// (chardev-add, device_add) without rebooting it.
//
// A Client belongs to one goroutine at a time. QEMU is trusted no more
// than any peer: a message is parsed once (Parse), and one that is not
// a greeting, a return, an error or an event is an error, never a
// panic. It imports only the standard library.
package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// maxMessage bounds one message: QEMU's largest replies (query-pci of
// a full bus, query-qmp-schema) stay far below it.
const maxMessage = 4 << 20

// maxQueued bounds the events kept while a command waits for its
// return: QEMU emits few, and a flood is dropped oldest first.
const maxQueued = 256

// Errors.
var (
	ErrMessage   = errors.New("qmp: malformed message")
	ErrTooLong   = errors.New("qmp: message too long")
	ErrNoGreet   = errors.New("qmp: no greeting")
	ErrCommandID = errors.New("qmp: reply to another command")
)

// Kind is what a message is.
type Kind int

// The kinds of message QEMU sends.
const (
	KindGreeting Kind = iota + 1
	KindReturn
	KindError
	KindEvent
)

// Message is one message from QEMU.
type Message struct {
	Kind   Kind
	ID     string          // the command's "id" (returns and errors)
	Return json.RawMessage // KindReturn: the result
	Error  *Error          // KindError
	Event  string          // KindEvent: the event's name
	Data   json.RawMessage // KindEvent: its data, or nil
	Time   time.Time       // KindEvent: its timestamp
}

// Error is a command's failure as QEMU reports it.
type Error struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *Error) Error() string { return "qmp: " + e.Class + ": " + e.Desc }

type wire struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *Error          `json:"error"`
	Event  *string         `json:"event"`
	Data   json.RawMessage `json:"data"`
	ID     json.RawMessage `json:"id"`
	Stamp  *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

// Parse parses one message. Exactly one of the members "QMP",
// "return", "error" and "event" must be present.
func Parse(b []byte) (Message, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMessage, err)
	}
	var m Message
	n := 0
	if w.QMP != nil {
		m.Kind, n = KindGreeting, n+1
	}
	if w.Return != nil {
		m.Kind, m.Return, n = KindReturn, w.Return, n+1
	}
	if w.Error != nil {
		m.Kind, m.Error, n = KindError, w.Error, n+1
	}
	if w.Event != nil {
		m.Kind, m.Event, m.Data, n = KindEvent, *w.Event, w.Data, n+1
		if w.Stamp != nil && w.Stamp.Seconds >= 0 && w.Stamp.Microseconds >= 0 && w.Stamp.Microseconds < 1e6 {
			m.Time = time.Unix(w.Stamp.Seconds, w.Stamp.Microseconds*1000)
		}
	}
	if n != 1 {
		return Message{}, fmt.Errorf("%w: %d of greeting, return, error and event", ErrMessage, n)
	}
	if w.ID != nil {
		var id string
		if err := json.Unmarshal(w.ID, &id); err != nil {
			return Message{}, fmt.Errorf("%w: id %s", ErrMessage, w.ID)
		}
		m.ID = id
	}
	return m, nil
}

// Client is one QMP connection.
type Client struct {
	conn   net.Conn
	r      *bufio.Reader
	seq    int
	events []Message // read while a command waited, oldest first
}

// Dial connects to QEMU's QMP socket at path, reads the greeting and
// leaves capability negotiation. ctx bounds the whole.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	m, err := c.read(ctx)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if m.Kind != KindGreeting {
		conn.Close()
		return nil, ErrNoGreet
	}
	if _, err := c.Execute(ctx, "qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// read reads one message, within ctx's deadline.
func (c *Client) read(ctx context.Context) (Message, error) {
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	c.conn.SetReadDeadline(time.Time{})
	if ctx.Err() != nil {
		return Message{}, ctx.Err()
	}
	var line []byte
	for {
		part, more, err := c.r.ReadLine()
		if err != nil {
			if ctx.Err() != nil {
				return Message{}, ctx.Err()
			}
			return Message{}, fmt.Errorf("qmp: read: %w", err)
		}
		line = append(line, part...)
		if len(line) > maxMessage {
			return Message{}, ErrTooLong
		}
		if !more {
			break
		}
	}
	return Parse(line)
}

// Execute runs command with args (nil for none) and returns its
// result. Events that arrive meanwhile are kept for WaitEvent. A
// command QEMU refuses returns its *Error.
func (c *Client) Execute(ctx context.Context, command string, args any) (json.RawMessage, error) {
	c.seq++
	id := fmt.Sprintf("hinic-%d", c.seq)
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("qmp: %s: %w", command, err)
	}
	dl, _ := ctx.Deadline() // zero: none, and no earlier one either
	c.conn.SetWriteDeadline(dl)
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp: %s: %w", command, err)
	}
	for {
		m, err := c.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("qmp: %s: %w", command, err)
		}
		switch m.Kind {
		case KindEvent:
			c.queue(m)
			continue
		case KindGreeting:
			return nil, fmt.Errorf("qmp: %s: %w: a second greeting", command, ErrMessage)
		}
		if m.ID != id {
			return nil, fmt.Errorf("qmp: %s: %w %q", command, ErrCommandID, m.ID)
		}
		if m.Kind == KindError {
			return nil, m.Error
		}
		return m.Return, nil
	}
}

func (c *Client) queue(m Message) {
	if len(c.events) == maxQueued {
		c.events = c.events[1:]
	}
	c.events = append(c.events, m)
}

// WaitEvent returns the first event named name for which match (nil:
// any) holds, among those already read and those to come, and drops
// the events before it. It waits until ctx is done.
func (c *Client) WaitEvent(ctx context.Context, name string, match func(data json.RawMessage) bool) (Message, error) {
	for i, m := range c.events {
		if m.Event == name && (match == nil || match(m.Data)) {
			c.events = c.events[i+1:]
			return m, nil
		}
	}
	c.events = c.events[:0]
	for {
		m, err := c.read(ctx)
		if err != nil {
			return Message{}, fmt.Errorf("qmp: waiting for %s: %w", name, err)
		}
		if m.Kind == KindEvent && m.Event == name && (match == nil || match(m.Data)) {
			return m, nil
		}
	}
}

// DeviceDeleted matches the DEVICE_DELETED event of the device whose
// qdev id is id (not the events of its child objects, which carry only
// a path).
func DeviceDeleted(id string) func(json.RawMessage) bool {
	return func(data json.RawMessage) bool {
		var d struct {
			Device string `json:"device"`
		}
		return json.Unmarshal(data, &d) == nil && d.Device == id
	}
}
