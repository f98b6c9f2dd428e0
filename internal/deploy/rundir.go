package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A rack's run directory holds its SSH private key, its guests' RAM
// files (every byte of each guest's memory) and the sockets of its
// fabric and device backend. The default is a predictable path under the
// shared /tmp, so another local user could create it first, or plant a
// symlink there, and have deploy write the key and the guest memory where
// they can read it, or trust a key of theirs. So the run directory is
// private: owned by this user, a real directory and not a symlink,
// writable by nobody else, and mode 0700 once deploy has used it; what
// deploy writes there is 0600 and opened without following symlinks.

// ErrUnsafeRunDir is returned for a run directory deploy will not use.
var ErrUnsafeRunDir = errors.New("unsafe run directory")

// privateMode is the mode of the run directory and the guest directories.
const privateMode = 0o700

// ensurePrivateDir creates dir (mode 0700; missing parents 0755) or
// checks an existing one with checkPrivateDir and narrows it to 0700 (an
// older deploy made it 0755).
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, privateMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	return os.Chmod(dir, privateMode)
}

// checkPrivateDir refuses a run directory that is a symlink or not a
// directory, that another user owns, or that group or others may write.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("deploy: run dir %s: %w: it is a symlink; remove it or choose another --run-dir", dir, ErrUnsafeRunDir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("deploy: run dir %s: %w: not a directory", dir, ErrUnsafeRunDir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("deploy: run dir %s: %w: owned by uid %d, not by you (uid %d); another user may have made it: choose another --run-dir",
			dir, ErrUnsafeRunDir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("deploy: run dir %s: %w: mode %04o lets others write it; chmod 700 it if it is yours, or choose another --run-dir",
			dir, ErrUnsafeRunDir, fi.Mode().Perm())
	}
	return nil
}

// ensureGuestDir creates a guest's directory in the run directory, 0700:
// it holds the guest's RAM file, disk overlay and console.
func ensureGuestDir(dir string) error {
	if err := os.Mkdir(dir, privateMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("deploy: %s: %w: not a directory", dir, ErrUnsafeRunDir)
	}
	return os.Chmod(dir, privateMode)
}

// openPrivate opens a run-directory file for writing, 0600, without
// following a symlink at path.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	// An older deploy created it 0644.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// writePrivate replaces a run-directory file's content (0600, no
// symlink followed).
func writePrivate(path string, data []byte) error {
	f, err := openPrivate(path, os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
