// Package clitest holds what the tests of hinic's commands share:
// keeping the developer's environment out of a test, short socket
// directories, running a serve command in the background and running a
// command to read its output. Only _test.go files import it.
package clitest

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// Isolate keeps the developer's environment and config files out of a
// test: an empty working directory and config home, and HINIC_CONFIG,
// HINIC_OUTPUT and the settings named in env unset (viper treats an empty
// variable as unset).
func Isolate(t *testing.T, env ...string) {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, k := range append([]string{"HINIC_CONFIG", "HINIC_OUTPUT"}, env...) {
		t.Setenv(k, "")
	}
}

// ShortDir returns a directory removed when the test ends, under the
// system's temporary directory rather than t.TempDir, whose long names
// push socket paths past the 108 bytes of sun_path.
func ShortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// WaitFor polls ready until it holds, and fails the test with what did
// not happen after five seconds.
func WaitFor(t *testing.T, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen in time", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Accepts reports whether a UNIX stream socket at path takes a
// connection, for WaitFor. A listener's file appears at bind(), before
// listen(), so a connection in between is refused: a test that talks to
// a socket waits for this, not for the file.
func Accepts(path string) func() bool {
	return func() bool {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
}

// Serve runs cmd with args in the background until stop, or the end of
// the test, cancels its context. stop returns what the command returned;
// at the end of the test an error fails it.
func Serve(t *testing.T, cmd *cobra.Command, args ...string) (stop func() error) {
	t.Helper()
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

// Output runs the command newCmd builds from a fresh Factory with args,
// and returns what it wrote to Out (or, for --help, cobra's output). An
// error fails the test.
func Output(t *testing.T, newCmd func(*cmdutil.Factory) *cobra.Command, args ...string) string {
	t.Helper()
	ios, _, out, _ := cmdutil.Test()
	c := newCmd(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}))
	c.SetArgs(args)
	c.SetOut(out) // help and usage, which cobra writes
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// Contains fails the test for each of want that text, named what in the
// message, lacks.
func Contains(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
