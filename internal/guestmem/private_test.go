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

// otherUID is a user the tests give files to: nobody.
const otherUID = 65534

// TestOpenRefusesAnotherUsersFile: a memory file another user owns is
// refused, whatever its mode: its owner can open it again, or widen its
// mode, at any time and read or write every guest byte. Only root can
// give a file away, so the test needs root; root could also chmod the
// file, which is why the refusal must not rest on chmod failing (it did:
// as root, a 0644 file of another user was narrowed and used, and a 0600
// one used as it was).
func TestOpenRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user (chown) needs root")
	}
	for _, mode := range []os.FileMode{0o600, 0o644} {
		t.Run(mode.String(), func(t *testing.T) {
			ram := filepath.Join(t.TempDir(), "ram")
			if err := os.WriteFile(ram, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(ram, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(ram, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			f, err := OpenPrivate(ram)
			if err == nil {
				f.Close()
				t.Fatalf("OpenPrivate accepted a file of uid %d", otherUID)
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), ram) || !strings.Contains(err.Error(), "uid 65534") {
				t.Fatalf("OpenPrivate = %v; want ErrUnsafeFile naming %s and its owner", err, ram)
			}
			if g, err := Open(ram, 1<<20, MachinePC); err == nil {
				g.Close()
				t.Fatal("Open accepted it")
			}
			// Nothing changed: not narrowed, not extended, still the
			// other user's.
			st, err := os.Stat(ram)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != mode || st.Size() != 0 || st.Sys().(*syscall.Stat_t).Uid != otherUID {
				t.Errorf("the file is now mode %04o, %d bytes, uid %d", st.Mode().Perm(), st.Size(), st.Sys().(*syscall.Stat_t).Uid)
			}
		})
	}
}
