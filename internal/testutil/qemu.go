package testutil

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/childproc"
)

// QEMU is one QEMU process of a test, its serial console (stdio) read
// line by line. A test waits for marker words on the console: the
// first word of a line's part that starts with the guest's prefix
// (such as "HICAIN-" or "HIGPU-").
type QEMU struct {
	Name   string
	Cmd    *exec.Cmd
	Stdin  io.WriteCloser // the console's input
	Out    LockedBuffer   // every console line
	prefix string
	mu     sync.Mutex
	seen   map[string]chan struct{}
}

// StartQEMU starts qemu with args (a serial console on stdio among
// them) and stops it when the test ends; a failed test logs the
// console.
func StartQEMU(t testing.TB, ctx context.Context, name, prefix, qemu string, args ...string) *QEMU {
	t.Helper()
	g := &QEMU{Name: name, prefix: prefix, seen: map[string]chan struct{}{}}
	g.Cmd = exec.CommandContext(ctx, qemu, args...)
	childproc.Tie(g.Cmd) // a killed test run takes its guests along
	pr, pw := io.Pipe()
	g.Cmd.Stdout, g.Cmd.Stderr = pw, pw
	stdin, err := g.Cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	g.Stdin = stdin
	if err := g.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			g.Out.WriteLine(line)
			if i := strings.Index(line, g.prefix); i >= 0 {
				m := strings.Fields(line[i:])[0]
				ch := g.marker(m)
				g.mu.Lock()
				select {
				case <-ch:
				default:
					close(ch)
				}
				g.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		childproc.KillGroup(g.Cmd)
		g.Cmd.Wait()
		pw.Close()
		if t.Failed() {
			t.Logf("%s console:\n%s", name, g.Out.String())
		}
	})
	return g
}

func (g *QEMU) marker(m string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[m] == nil {
		g.seen[m] = make(chan struct{})
	}
	return g.seen[m]
}

// Seen reports whether a console line carried marker.
func (g *QEMU) Seen(marker string) bool {
	select {
	case <-g.marker(marker):
		return true
	default:
		return false
	}
}

// Wait waits for a console line with marker, failing the test when ctx
// ends first.
func (g *QEMU) Wait(ctx context.Context, t testing.TB, marker string) {
	t.Helper()
	select {
	case <-g.marker(marker):
	case <-ctx.Done():
		t.Fatalf("%s: no %q on the console", g.Name, marker)
	}
}
