package deploy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProc starts a process whose executable is a copy of bash named
// exe (in a directory of its own) and whose argv holds args, as alive
// wants the rack's processes, and waits until it shows them.
func fakeProc(t *testing.T, exe string, args ...string) (pid int, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), exe)
	src, err := os.Open("/bin/bash")
	if err != nil {
		t.Skip("no /bin/bash")
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	return startArgv(t, path, args...), path
}

// startArgv starts bash (or a copy of it at path) sleeping with args in
// its argv, and waits until its cmdline shows them: until bash has
// exec'd, the child is a copy of this test, and a "not alive" would be
// about that copy.
func startArgv(t *testing.T, path string, args ...string) int {
	t.Helper()
	cmd := exec.Command(path, append([]string{"-c", "sleep 60; :", "x"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if hasRun(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), args) {
			return cmd.Process.Pid
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s never showed its arguments %q (cmdline %q)", path, args, b)
		}
	}
}

// TestRestartDeviceNeedsQMP: a running hicain guest whose QEMU has no
// QMP monitor (started before deploy gave it one) cannot get a new
// function, so restart device refuses before it stops anything, names
// the guest and says what to do; the backend keeps running.
func TestRestartDeviceNeedsQMP(t *testing.T) {
	runDir, err := os.MkdirTemp("", "hr-rs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	if err := os.Chmod(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &Rack{RunDir: runDir, Guests: []Guest{{Name: "vm-a", NIC: NICHicain, Memory: 64}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	dir := GuestDir(r, "vm-a")
	if err := ensureGuestDir(dir); err != nil {
		t.Fatal(err)
	}
	qpid, _ := fakeProc(t, "qemu-system-x86_64", "-pidfile", filepath.Join(dir, "qemu.pid"))
	dpid, dexe := fakeProc(t, "hinic", DeviceArgs(r)...)
	st := &State{Rack: *r, path: filepath.Join(runDir, FileState), DevicePID: dpid, DeviceExe: dexe,
		Guests: []GuestState{{Name: "vm-a", PID: qpid, Dir: dir, NIC: NICHicain}}}
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	_, err = RestartDevice(context.Background(), runDir, RestartOptions{Kill: true,
		Progress: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }})
	if err == nil {
		t.Fatal("restart device went ahead without a QMP monitor")
	}
	for _, want := range []string{"vm-a", "QMP", "nothing was stopped", "hinic deploy down"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !alive(dpid, deviceProc(r, dexe)) {
		t.Errorf("the backend was stopped (progress %q)", lines)
	}

	// A rack without hicain guests has no backend to restart.
	st.Rack.Guests = []Guest{{Name: "vm-r"}}
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := RestartDevice(context.Background(), runDir, RestartOptions{}); err == nil ||
		!strings.Contains(err.Error(), "no hicain guests") {
		t.Errorf("rack without hicain guests: %v", err)
	}
}

// TestRestartHiLinkWithoutSwitch: a rack whose GPUs cable to no HiLink
// switch (or that has no GPUs) has none to restart, and says so.
func TestRestartHiLinkWithoutSwitch(t *testing.T) {
	runDir := t.TempDir()
	for _, g := range []Guest{{Name: "vm-a", NIC: NICHicain, Memory: 64}, {Name: "vm-g", Memory: 64, GPUs: GPUs{Count: 1, Memory: 32, HiLink: HiLinkNone}}} {
		r := &Rack{RunDir: runDir, Guests: []Guest{g}}
		if err := r.Defaults(); err != nil {
			t.Fatal(err)
		}
		st := &State{Rack: *r, path: filepath.Join(runDir, FileState)}
		if err := st.save(); err != nil {
			t.Fatal(err)
		}
		if _, err := RestartHiLink(context.Background(), runDir, RestartOptions{}); err == nil ||
			!strings.Contains(err.Error(), "runs no HiLink switch") {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
}

// TestReleaseScript runs the guest script that lets the old function
// go against a sysfs of files: it sets driver_override to none and
// writes the function's address to its driver's unbind, and fails for a
// function that is not there.
func TestReleaseScript(t *testing.T) {
	sysfs := t.TempDir()
	const bdf = "0000:00:04.0"
	dev := filepath.Join(sysfs, "bus/pci/devices", bdf)
	drv := filepath.Join(sysfs, "bus/pci/drivers", hicainDriver)
	for _, d := range []string{dev, drv} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(drv, filepath.Join(dev, "driver")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", releaseScript(sysfs, bdf)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for file, want := range map[string]string{
		filepath.Join(dev, "driver_override"): "none\n",
		filepath.Join(drv, "unbind"):          bdf + "\n",
	} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	// Unbound already: only the override.
	os.Remove(filepath.Join(dev, "driver"))
	os.Remove(filepath.Join(drv, "unbind"))
	if out, err := exec.Command("sh", "-c", releaseScript(sysfs, bdf)).CombinedOutput(); err != nil {
		t.Fatalf("unbound function: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(drv, "unbind")); err == nil {
		t.Error("an unbound function was unbound again")
	}
	out, err := exec.Command("sh", "-c", releaseScript(sysfs, "0000:00:09.0")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no PCI function 0000:00:09.0") {
		t.Errorf("a missing function: %v: %s", err, out)
	}
	// The PCI core's resource_alignment gets the ivshmem entry, beside
	// what is there and only once.
	align := filepath.Join(sysfs, "bus/pci/resource_alignment")
	for _, tc := range []struct{ before, want string }{
		{"", ivshmemAlignment + "\n"},
		{"pci:8086:1237\n", "pci:8086:1237;" + ivshmemAlignment + "\n"},
		{ivshmemAlignment + "\n", ivshmemAlignment + "\n"},
	} {
		if err := os.WriteFile(align, []byte(tc.before), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("sh", "-c", releaseScript(sysfs, bdf)).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if b, _ := os.ReadFile(align); string(b) != tc.want {
			t.Errorf("resource_alignment %q became %q, want %q", tc.before, b, tc.want)
		}
	}
}
