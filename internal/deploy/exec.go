package deploy

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Exec runs cmd in a shell on the guest with stdin, stdout and stderr
// connected to the given streams (stdin may be nil) and returns the
// command's exit status. An error means the command could not be run or
// was cut off (by the context, or a lost connection), not that it failed.
// One writer may take both streams: its writes are then serialised.
func (c *Client) Exec(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if sameWriter(stdout, stderr) {
		// The session copies each stream in its own goroutine; two
		// io.Copy calls into one bytes.Buffer run its ReadFrom at
		// once, and the stream that ends first truncates the other's.
		w := &syncWriter{w: stdout}
		stdout, stderr = w, w
	}
	s, err := c.c.NewSession()
	if err != nil {
		return -1, err
	}
	defer s.Close()
	s.Stdin, s.Stdout, s.Stderr = stdin, stdout, stderr
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		s.Close()
		<-done
		return -1, ctx.Err()
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// sameWriter reports whether a and b are the same writer (never for
// writers whose type cannot be compared).
func sameWriter(a, b io.Writer) bool {
	t := reflect.TypeOf(a)
	return t != nil && t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// syncWriter serialises the writes to w, and offers nothing but Write:
// io.Copy then never calls w's own ReadFrom.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
