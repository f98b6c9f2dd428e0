package guestmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/PacketFive/hinic/internal/testutil"
)

// The RAM file sits in a directory others may have written to: a
// symbolic link or a FIFO in its place is refused, before anything is
// created, extended or mapped through it; a file open to others is
// narrowed to 0600.
func TestOpenRefusesUnsafeRAMFiles(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir, ram string)
		check   func(t *testing.T, dir string)
		why     string // in the error; "" when Open must succeed
	}{
		{
			name: "a symlink to a file",
			prepare: func(t *testing.T, dir, ram string) {
				victim := filepath.Join(dir, "victim")
				if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(victim, ram); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string) {
				// Not extended to the RAM size, not written.
				if b, err := os.ReadFile(filepath.Join(dir, "victim")); err != nil || string(b) != "keep" {
					t.Errorf("the link's target is now %q, %v", b, err)
				}
			},
			why: "is a symbolic link",
		},
		{
			name: "a dangling symlink",
			prepare: func(t *testing.T, dir, ram string) {
				if err := os.Symlink(filepath.Join(dir, "made"), ram); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string) {
				if _, err := os.Lstat(filepath.Join(dir, "made")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the link's target was created: %v", err)
				}
			},
			why: "is a symbolic link",
		},
		{
			name: "a FIFO",
			prepare: func(t *testing.T, dir, ram string) {
				if err := syscall.Mkfifo(ram, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			why: "not a regular file",
		},
		{
			name: "a file others can read",
			prepare: func(t *testing.T, dir, ram string) {
				if err := os.WriteFile(ram, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				// WriteFile's mode is cut by the umask; this is not.
				if err := os.Chmod(ram, 0o666); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string) {
				if m := testutil.Perm(t, filepath.Join(dir, "ram")); m != 0o600 {
					t.Errorf("RAM file mode %04o, want it narrowed to 0600", m)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ram := filepath.Join(dir, "ram")
			tc.prepare(t, dir, ram)
			g, err := Open(ram, size, MachinePC)
			if tc.why == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				g.Close()
			} else {
				if err == nil {
					g.Close()
					t.Fatal("Open accepted it")
				}
				if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), ram) {
					t.Fatalf("Open = %v; want ErrUnsafeFile naming %s and saying %q", err, ram, tc.why)
				}
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}
}
