package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpawnProcs checks that a daemon runs with the rack's GOMAXPROCS,
// over whatever the caller's environment says, and with the caller's
// when the rack sets none.
func TestSpawnProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	for _, tc := range []struct {
		procs int
		want  string
	}{{1, "1"}, {3, "3"}, {0, "7"}} {
		dir := t.TempDir()
		out := filepath.Join(dir, "env")
		d := daemon{what: "test daemon", procs: tc.procs,
			args:    []string{"-c", `echo "$GOMAXPROCS" > ` + out + `.tmp && mv ` + out + `.tmp ` + out + ` && exec sleep 30`},
			logPath: filepath.Join(dir, "log"), pidPath: filepath.Join(dir, "pid"),
			ready: func() bool { _, err := os.Stat(out); return err == nil }}
		pid, _, err := spawn(context.Background(), "/bin/sh", d)
		if pid != 0 {
			defer syscall.Kill(pid, syscall.SIGKILL)
		}
		if err != nil {
			t.Fatalf("procs %d: %v", tc.procs, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != tc.want {
			t.Errorf("procs %d: the daemon ran with GOMAXPROCS=%q, want %q", tc.procs, got, tc.want)
		}
	}
}
