// Package rundir says where the host processes of a rack (hinic fabric
// serve, device serve, gpu serve, link serve) put their sockets when the
// user names no directory. It is a leaf: the standard library only, so
// that every serving command reaches the default without importing
// another one's package.
package rundir

import (
	"fmt"
	"os"
	"path/filepath"
)

// Default returns $XDG_RUNTIME_DIR/hinic, or /run/hinic as root, or a
// directory under the system temporary directory otherwise.
func Default() string {
	if os.Geteuid() == 0 {
		return "/run/hinic"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "hinic")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("hinic-%d", os.Getuid()))
}

// Dir returns set when it is not empty, else Default(): the run
// directory of a command whose setting may name one.
func Dir(set string) string {
	if set != "" {
		return set
	}
	return Default()
}

// File returns set when it is not empty, else name in Default(): where a
// command's socket is when its setting names none.
func File(set, name string) string {
	if set != "" {
		return set
	}
	return filepath.Join(Default(), name)
}
