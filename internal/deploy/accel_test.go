package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/image"
)

// hungKVM is a host whose /dev/kvm opens but whose probe guest prints
// nothing (the kvm-pvm hosts).
func hungKVM(boots *int) *accel.Prober {
	return &accel.Prober{
		QEMU: os.Args[0], NoCache: true,
		ReadHost: func(string) accel.HostFacts {
			return accel.HostFacts{DevKVM: "ok", CPUVirt: "none", Modules: []string{"kvm", "kvm_pvm"}}
		},
		BootProbe: func(context.Context, string, string, time.Duration) accel.Boot {
			*boots++
			return accel.Boot{Elapsed: accel.DefaultTimeout}
		},
	}
}

func imageDirWithKernel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, image.FileKernel), []byte("a kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUpRefusesKVMAtOnce: accel: kvm on a host where the probe fails stops
// Up before the fabric, the backend or any guest starts.
func TestUpRefusesKVMAtOnce(t *testing.T) {
	if missing := image.MissingTools("qemu-system-x86_64", "qemu-img"); len(missing) > 0 {
		t.Skip(image.ErrMissingTools(missing))
	}
	boots := 0
	r := &Rack{Accel: accel.KVM, RunDir: t.TempDir(), Image: imageDirWithKernel(t)}
	st, err := Up(context.Background(), r, UpOptions{Hinic: "/nonexistent/hinic", Prober: hungKVM(&boots)})
	if err == nil || !strings.Contains(err.Error(), "KVM cannot boot a guest kernel") || !strings.Contains(err.Error(), "accel: tcg") {
		t.Fatalf("Up = %v", err)
	}
	if boots != 1 {
		t.Errorf("%d probe boots, want 1", boots)
	}
	if st != nil && (st.FabricPID != 0 || st.DevicePID != 0) {
		t.Errorf("started the fabric (%d) or the device (%d)", st.FabricPID, st.DevicePID)
	}
	if _, err := os.Stat(filepath.Join(r.RunDir, FileFabricLog)); err == nil {
		t.Error("the fabric was started")
	}
}

func TestChooseAccel(t *testing.T) {
	imgA, imgB := imageDirWithKernel(t), imageDirWithKernel(t)
	var lines []string
	progress := func(f string, a ...any) { lines = append(lines, strings.TrimSpace(fmt.Sprintf(f, a...))) }
	t.Run("auto on a hung KVM is TCG with the reason", func(t *testing.T) {
		boots := 0
		lines = nil
		r := &Rack{Accel: accel.Auto, Guests: []Guest{{Name: "a", Image: imgA}, {Name: "b", Image: imgA}}}
		m, why, err := chooseAccel(context.Background(), r, hungKVM(&boots), progress)
		if err != nil || m[imgA] != accel.TCG || boots != 1 {
			t.Fatalf("%v %v, %d boots", m, err, boots)
		}
		if len(why) != 1 || !strings.HasPrefix(why[0], "accel: TCG: /dev/kvm opens, but a guest kernel printed nothing") {
			t.Errorf("why %q", why)
		}
		if lines[len(lines)-1] != why[0] {
			t.Errorf("progress %q", lines)
		}
	})
	t.Run("one line per image", func(t *testing.T) {
		boots := 0
		r := &Rack{Accel: accel.Auto, Guests: []Guest{{Name: "a", Image: imgA}, {Name: "b", Image: imgB}}}
		m, why, err := chooseAccel(context.Background(), r, hungKVM(&boots), progress)
		if err != nil || len(m) != 2 || len(why) != 2 || boots != 2 || !strings.HasSuffix(why[1], "(guests of "+imgB+")") {
			t.Errorf("%v %q %v, %d boots", m, why, err, boots)
		}
	})
	t.Run("tcg does not probe", func(t *testing.T) {
		boots := 0
		r := &Rack{Accel: accel.TCG, Guests: []Guest{{Name: "a", Image: imgA}}}
		m, _, err := chooseAccel(context.Background(), r, hungKVM(&boots), progress)
		if err != nil || m[imgA] != accel.TCG || boots != 0 {
			t.Errorf("%v %v, %d boots", m, err, boots)
		}
	})
}

func TestConsoleHint(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "console.log")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	if h := consoleHint(p, accel.KVM); !strings.Contains(h, "is empty") || !strings.Contains(h, "set accel: tcg") {
		t.Errorf("empty under KVM: %q", h)
	}
	write("\r\n")
	if h := consoleHint(p, accel.TCG); !strings.Contains(h, "is empty") || strings.Contains(h, "accel: tcg") {
		t.Errorf("empty under TCG: %q", h)
	}
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		b.WriteString(fmt.Sprintf("line %d\r\n", i))
	}
	write(b.String())
	h := consoleHint(p, accel.KVM)
	if !strings.Contains(h, "ends with:\n    line 13\n") || !strings.HasSuffix(h, "    line 20") || strings.Contains(h, "line 12\n") {
		t.Errorf("lines: %q", h)
	}
	if h := consoleHint(filepath.Join(dir, "none"), accel.TCG); !strings.Contains(h, "no console log") {
		t.Errorf("missing: %q", h)
	}
}
