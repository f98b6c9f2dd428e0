package deploy

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeQEMU starts a process that alive takes for a guest's QEMU: a copy
// of sh named qemu-system-test whose command line holds the guest's
// -pidfile. It waits on its standard input until the test ends.
func fakeQEMU(t *testing.T, guestDir string) int {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "qemu-system-test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// read is a builtin: the shell itself waits, no child replaces it.
	cmd := exec.Command(exe, "-c", "read x", "qemu", "-pidfile", filepath.Join(guestDir, "qemu.pid"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		io.WriteString(in, "\n")
		in.Close()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

func TestInspect(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := Rack{Name: "r", RunDir: dir, Switches: []Switch{{Name: "sw0"}, {Name: "sw1"}}, Guests: []Guest{
		{Name: "vm-a", NIC: NICHicain, GPUs: GPUs{Count: 2}},
		{Name: "vm-b", Switch: "sw1", Port: 7},
		{Name: "vm-c"},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	spec, err := InspectSpec(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := GuestRow{Rack: "r", Name: "vm-a", State: StateNotDeployed, NIC: NICHicain, Link: LinkEth, IP: "10.42.0.1",
		MAC: "52:54:00:42:00:01", Switch: "sw0", Port: 1, SSHPort: 2222, Image: DefaultImage, GPUs: 2}
	if spec[0] != want || spec[1].Switch != "sw1" || spec[1].Port != 7 || spec[2].State != StateNotDeployed {
		t.Errorf("spec rows %+v", spec)
	}

	aDir, bDir := filepath.Join(dir, "vm-a"), filepath.Join(dir, "vm-b")
	pid := fakeQEMU(t, aDir)
	st := State{Rack: r, Guests: []GuestState{
		{Name: "vm-a", Dir: aDir, PID: pid, DataIP: "10.42.0.1"},
		{Name: "vm-b", Dir: bDir, PID: 1}, // pid 1 is no QEMU of this rack
	}}
	b, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		state string
		pid   int
	}{{"running", pid}, {"crashed", 0}, {StateNotStarted, 0}} {
		if rows[i].State != w.state || rows[i].PID != w.pid {
			t.Errorf("%s: state %q pid %d, want %q %d", rows[i].Name, rows[i].State, rows[i].PID, w.state, w.pid)
		}
	}
	if rows[0].MAC != want.MAC || rows[0].SSHPort != 2222 || rows[0].Image != DefaultImage {
		t.Errorf("row %+v", rows[0])
	}
	if _, err := Inspect(t.TempDir()); err == nil {
		t.Error("a run directory without a rack: no error")
	}
}
