package cmdutil

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are the streams a command reads and writes. Commands never use
// os.Stdin, os.Stdout or os.Stderr directly, so tests can hand them
// buffers.
//
// Machine-readable results go to Out; errors, logs and progress go to
// ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// OutIsTerminal reports whether Out is a terminal. Styling, colour and
	// box drawing are used only when it is.
	OutIsTerminal bool
	// ErrIsTerminal reports whether ErrOut is a terminal; progress displays
	// are drawn only when it is.
	ErrIsTerminal bool
}

// System returns the process's standard streams.
func System() *IOStreams {
	return &IOStreams{
		In:            os.Stdin,
		Out:           os.Stdout,
		ErrOut:        os.Stderr,
		OutIsTerminal: isTerminal(os.Stdout),
		ErrIsTerminal: isTerminal(os.Stderr),
	}
}

// Test returns streams backed by buffers, as a pipe would be: not a
// terminal. Set OutIsTerminal to test terminal output.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = new(bytes.Buffer), new(bytes.Buffer), new(bytes.Buffer)
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
