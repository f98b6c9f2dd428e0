package unixsock

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListen(t *testing.T) {
	dir := t.TempDir()
	for _, network := range []string{"unix", "unixpacket"} {
		t.Run(network, func(t *testing.T) {
			path := filepath.Join(dir, network+".sock")
			ln, err := Listen(network, path, 0o660)
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
				t.Errorf("mode %v, %v", fi.Mode(), err)
			}
			// A live socket is not taken over.
			if _, err := Listen(network, path, 0o660); !errors.Is(err, ErrInUse) {
				t.Errorf("second Listen: %v, want ErrInUse", err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the live socket was removed: %v", err)
			}
			// A stale one (left by a process that died) is replaced.
			ln.SetUnlinkOnClose(false)
			ln.Close()
			ln, err = Listen(network, path, 0o600)
			if err != nil {
				t.Fatalf("stale: %v", err)
			}
			c, err := net.Dial(network, path)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			ln.Close()
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("Close left the socket: %v", err)
			}
		})
	}
}

func TestListenRefusesNonSockets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, link, dir} {
		if _, err := Listen("unix", p, 0o660); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Error("the file was touched")
	}
	if _, err := os.Lstat(link); err != nil {
		t.Error("the symlink was removed")
	}
}

// A socket of the other type is live, not stale: a stream listener on a
// path where a packet server was expected is left alone.
func TestListenOtherTypeIsNotStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Listen("unixpacket", path, 0o660); err == nil {
		t.Fatal("took over a live stream socket")
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("removed: %v", err)
	}
}
