package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestDefault(t *testing.T) {
	if os.Geteuid() == 0 {
		if got := Default(); got != "/run/hinic" {
			t.Fatalf("as root: %q, want /run/hinic", got)
		}
		return
	}
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1234")
	if got := Default(); got != "/run/user/1234/hinic" {
		t.Errorf("with XDG_RUNTIME_DIR: %q", got)
	}
	want := filepath.Join(os.TempDir(), fmt.Sprintf("hinic-%d", os.Getuid()))
	for _, x := range []string{"", "relative/dir"} {
		t.Setenv("XDG_RUNTIME_DIR", x)
		if got := Default(); got != want {
			t.Errorf("with XDG_RUNTIME_DIR=%q: %q, want %q", x, got, want)
		}
	}
}

func TestDir(t *testing.T) {
	if got := Dir("/tmp/rack1"); got != "/tmp/rack1" {
		t.Errorf("a set directory: %q", got)
	}
	if got := Dir(""); got != Default() {
		t.Errorf("no setting: %q, want %q", got, Default())
	}
}

func TestFile(t *testing.T) {
	if got := File("/tmp/rack1/device.sock", "device.sock"); got != "/tmp/rack1/device.sock" {
		t.Errorf("a set path: %q", got)
	}
	if got, want := File("", "gpu.sock"), filepath.Join(Default(), "gpu.sock"); got != want {
		t.Errorf("no setting: %q, want %q", got, want)
	}
}
