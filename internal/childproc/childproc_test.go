package childproc_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/testutil"
)

// TestCancelKillsGroup: cancelling a tied command's context kills what
// the command started too. Before Tie, exec killed only the shell and
// its sleep ran on.
func TestCancelKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 300 & echo $!; wait")
	childproc.Tie(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	// $! is known before the forked shell has become sleep.
	for deadline := time.Now().Add(5 * time.Second); !testutil.Running(pid, "sleep"); {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's sleep %d does not run", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); testutil.Running(pid, "sleep"); {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's sleep %d runs on after the command was cancelled", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := childproc.KillGroup(cmd); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("KillGroup after Wait: %v", err)
	}
}
