package deploy

import (
	"context"
	"errors"
	"io"

	"golang.org/x/crypto/ssh"
)

// Exec runs cmd in a shell on the guest with stdin, stdout and stderr
// connected to the given streams (stdin may be nil) and returns the
// command's exit status. An error means the command could not be run or
// was cut off (by the context, or a lost connection), not that it failed.
func (c *Client) Exec(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
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
