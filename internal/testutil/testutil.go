// Package testutil holds what several packages' tests share: gating tests
// on installed tools, finding a QEMU test guest's kernel and busybox, a
// cpio "newc" writer for its initramfs, a line buffer safe for concurrent
// writers, and two network namespaces joined by a veth pair. Only _test.go
// files import it.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// RequireTool skips the test when a tool it needs is missing (ok false),
// unless HINIC_REQUIRE_TOOLS=1 (CI sets it), where a missing tool is a
// failure rather than a silent skip. hint says how to get the tool.
func RequireTool(t testing.TB, what, hint string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf("%s not available (%s)", what, hint)
	if os.Getenv("HINIC_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg + "; HINIC_REQUIRE_TOOLS=1 makes this a failure")
	}
	t.Skip(msg)
}

// CPIO writes a cpio "newc" archive in memory, the format the kernel
// unpacks as an initramfs: no mount, loop device, root or cpio tool is
// needed to build a test guest's root file system.
type CPIO struct {
	buf bytes.Buffer
	ino uint32
}

func (w *CPIO) header(name string, mode uint32, size int, rmaj, rmin uint32) {
	w.ino++
	nlink := uint32(1)
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	fmt.Fprintf(&w.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		w.ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, len(name)+1, 0)
	w.buf.WriteString(name)
	w.buf.WriteByte(0)
	w.pad()
}

func (w *CPIO) pad() {
	for w.buf.Len()%4 != 0 {
		w.buf.WriteByte(0)
	}
}

// Dir adds a directory (mode 0755).
func (w *CPIO) Dir(name string) { w.header(name, 0o040755, 0, 0, 0) }

// Node adds a device node; mode includes the file type bits (for example
// 0o20600 for a character device).
func (w *CPIO) Node(name string, mode, major, minor uint32) { w.header(name, mode, 0, major, minor) }

// File adds a regular file with permission bits perm.
func (w *CPIO) File(name string, perm uint32, data []byte) {
	w.header(name, 0o100000|perm, len(data), 0, 0)
	w.buf.Write(data)
	w.pad()
}

// Bytes ends the archive with its trailer and returns it.
func (w *CPIO) Bytes() []byte {
	w.header("TRAILER!!!", 0, 0, 0, 0)
	return w.buf.Bytes()
}

// BusyboxInitramfs starts an archive with the directories dirs,
// /dev/console, the busybox binary at busybox as /bin/busybox and /bin/sh,
// and init as /init; the caller may add more before Bytes.
func BusyboxInitramfs(busybox, init string, dirs ...string) (*CPIO, error) {
	var w CPIO
	for _, d := range append([]string{"dev", "bin"}, dirs...) {
		w.Dir(d)
	}
	w.Node("dev/console", 0o20600, 5, 1) // character device 5:1
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	w.File("bin/busybox", 0o755, bb)
	w.File("bin/sh", 0o755, bb)
	w.File("init", 0o755, []byte(init))
	return &w, nil
}

// LockedBuffer collects lines from several goroutines (a guest's console
// reader and the test).
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// WriteLine appends s and a newline.
func (l *LockedBuffer) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
	l.b.WriteByte('\n')
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// GuestBoot returns what a QEMU test guest boots with: the QEMU binary,
// the newest Debian 6.1 kernel in /boot and its release (the name of its
// /lib/modules directory), and the static busybox of its initramfs. A
// missing one skips the test (fails it under HINIC_REQUIRE_TOOLS=1).
func GuestBoot(t testing.TB) (qemu, kernel, release, busybox string) {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	RequireTool(t, "qemu-system-x86_64", "apt-get install qemu-system-x86", err == nil)
	kernel, release = GuestKernel(t)
	busybox = "/bin/busybox"
	_, err = os.Stat(busybox)
	RequireTool(t, "static busybox", "apt-get install busybox-static", err == nil)
	return qemu, kernel, release, busybox
}

// GuestKernel returns the newest Debian 6.1 kernel in /boot and its
// release, skipping the test when there is none.
func GuestKernel(t testing.TB) (path, release string) {
	t.Helper()
	kernels, _ := filepath.Glob("/boot/vmlinuz-6.1.0-*")
	slices.Sort(kernels)
	RequireTool(t, "a Linux 6.1 kernel in /boot", "apt-get install linux-image-amd64", len(kernels) > 0)
	path = kernels[len(kernels)-1]
	return path, strings.TrimPrefix(filepath.Base(path), "vmlinuz-")
}

// Perm returns the permission bits of the file at p, not following a
// final symbolic link (os.Lstat), failing t when it cannot be read.
func Perm(t testing.TB, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// ShortTempDir is a directory under the system's temporary directory,
// named prefix and a few characters, removed when the test ends. Unlike
// t.TempDir, whose path carries the test's name, it leaves room for the
// UNIX socket paths a rack makes below it (108 bytes at most).
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
