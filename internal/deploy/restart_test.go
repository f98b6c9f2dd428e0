package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/qmp"
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
	cmd := exec.Command(path, append([]string{"-c", "sleep 60; :", "x"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if hasRun(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), args) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s never showed its arguments", exe)
		}
	}
	return cmd.Process.Pid, path
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

// monitor serves one QMP connection on a UNIX socket: the greeting,
// then reply(command) for each command.
func monitor(t *testing.T, reply func(cmd map[string]any) string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileQMP)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var cmd map[string]any
			if json.Unmarshal(sc.Bytes(), &cmd) != nil {
				return
			}
			r := reply(cmd)
			r = strings.ReplaceAll(r, "ID", fmt.Sprint(cmd["id"]))
			c.Write([]byte(r + "\n"))
		}
	}()
	return path
}

// TestReplugGuestErrors: a guest whose QEMU refuses to remove or to
// realize the function gets an error that names it, says where to look
// and what to do.
func TestReplugGuestErrors(t *testing.T) {
	r := &Rack{RunDir: t.TempDir(), Guests: []Guest{{Name: "vm-a", NIC: NICHicain, Memory: 64}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := &State{Rack: *r, Guests: []GuestState{{Name: "vm-a", Dir: GuestDir(r, "vm-a")}}}
	for _, c := range []struct {
		name, fail string
		want       []string
	}{
		{"device_del", "device_del", []string{"vm-a", "device_del", "console.log", "dmesg", "hinic deploy down"}},
		{"device_add", "device_add", []string{"vm-a", "device_add", "no HiNIC function", "hinic deploy down"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := monitor(t, func(cmd map[string]any) string {
				switch cmd["execute"] {
				case c.fail:
					return `{"id": "ID", "error": {"class": "GenericError", "desc": "refused"}}`
				case "device_del":
					return `{"return": {}, "id": "ID"}` + "\n" + `{"event": "DEVICE_DELETED", "data": {"device": "hicain0"}}`
				}
				return `{"return": {}, "id": "ID"}`
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			mon, err := qmp.Dial(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer mon.Close()
			err = replugGuest(ctx, st, replugTarget{g: r.Guests[0], gs: &st.Guests[0], mon: mon,
				addr: qmp.PCIAddr{Slot: 4}}, func(string, ...any) {})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
