package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/testutil"
)

// unitsRack is a libvirt host's part with a split fabric and two hicain
// vNICs: both daemons run as the package's units.
const unitsRack = `name: units
network: 10.62.0.0/24
ssh-port-base: 2460
daemons: split
hosts:
  - name: h1
    address: 127.0.0.1
    libvirt: qemu:///system
switches:
  - name: sw0
    ports: 4
guests:
  - name: vm-a
    nic: hicain
    ip: 10.62.0.1
    mac: "52:54:00:62:00:01"
    port: 1
  - name: vm-b
    nic: hicain
    ip: 10.62.0.2
    mac: "52:54:00:62:00:02"
    port: 2
`

// TestUnitsUnderSystemd starts a libvirt host's fabric and device
// backend the way deploy rack does (startFabric, startDevice) under a
// real systemd, from the installed hinic-fabric@ and hinic-device@
// templates, and checks what deploy relies on: each daemon is its
// unit's main process, runs /usr/bin/hinic with no capabilities and
// no_new_privs, answers on its control socket in the run directory (the
// sandbox's only writable path), its ivshmem sockets and RAM files made
// there, its log in the journal; deploy down stops both, leaving no unit
// active or failed. Only with HINIC_UNITS_UNDER_SYSTEMD=1.
func TestUnitsUnderSystemd(t *testing.T) {
	if os.Getenv(EnvUnitsUnderSystemd) == "" {
		t.Skipf("needs systemd as PID 1 and the hinic package: TestHostUnits runs it in a guest (%s=1)", EnvUnitsUnderSystemd)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the units run as root: run as root")
	}
	r, err := ParseRack([]byte(unitsRack))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	// Short, for the backend's socket paths; its '-' is what a unit
	// instance name escapes (\x2d).
	r.RunDir = testutil.ShortTempDir(t, "hinic-units-")
	if ok, why := r.useUnits(); !ok {
		t.Fatalf("useUnits: %s", why)
	}
	if err := ensurePrivateDir(r.RunDir); err != nil {
		t.Fatal(err)
	}
	st := &State{Rack: *r, path: filepath.Join(r.RunDir, FileState)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	downed := false
	t.Cleanup(func() {
		// What a failed start left: deploy down's stop (the units'
		// too), and no failed instance kept by systemd.
		if !downed {
			_ = st.save()
			_ = Down(r.RunDir, t.Logf)
			for _, u := range []string{UnitFabric, UnitDevice} {
				_ = exec.Command("systemctl", "reset-failed", unitName(u, r.RunDir)).Run()
			}
		}
	})
	if err := startFabric(ctx, st, "", t.Logf); err != nil {
		t.Fatalf("fabric: %v\n%s", err, journal(UnitFabric, r.RunDir))
	}
	if _, err := startDevice(ctx, st, "", t.Logf); err != nil {
		t.Fatalf("device: %v\n%s", err, journal(UnitDevice, r.RunDir))
	}
	if err := st.save(); err != nil {
		t.Fatal(err)
	}

	for _, u := range []struct {
		template string
		pid      int
	}{{UnitFabric, st.FabricPID}, {UnitDevice, st.DevicePID}} {
		name := unitName(u.template, r.RunDir)
		if got := systemctlShow(t, name, "MainPID"); got != fmt.Sprint(u.pid) {
			t.Errorf("%s: MainPID %s, the state has %d", name, got, u.pid)
		}
		if got := systemctlShow(t, name, "ActiveState"); got != "active" {
			t.Errorf("%s: %s", name, got)
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", u.pid)); err != nil || exe != "/usr/bin/hinic" {
			t.Errorf("%s runs %q (%v), not the package's /usr/bin/hinic", name, exe, err)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", u.pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !strings.Contains(string(status), want) {
				t.Errorf("%s: /proc/%d/status lacks %q", name, u.pid, want)
			}
		}
		// The unit's environment file is deploy's command line.
		env, err := os.ReadFile(unitEnvFile(r.RunDir, u.template))
		if err != nil || !strings.Contains(string(env), "HINIC_ARGS=") {
			t.Errorf("%s's env file: %v %q", name, err, env)
		}
	}

	fs, err := fabric.QueryStatus(ctx, filepath.Join(r.RunDir, DirFabric))
	if err != nil {
		t.Fatalf("fabric status: %v", err)
	}
	if len(fs.Switches) != 1 {
		t.Errorf("fabric status: %d switches", len(fs.Switches))
	}
	ds, err := device.QueryStatus(ctx, DeviceControl(r))
	if err != nil {
		t.Fatalf("device status: %v", err)
	}
	if len(ds.VNICs) != 2 {
		t.Errorf("device status: %d vNICs, want 2", len(ds.VNICs))
	}
	for _, g := range r.hicainGuests() {
		// The backend made each vNIC's ivshmem socket in the run
		// directory, through the sandbox's one writable path.
		if _, err := os.Stat(IvshmemSocket(r, g)); err != nil {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
	for _, u := range []string{UnitFabric, UnitDevice} {
		if j := journal(u, r.RunDir); !strings.Contains(j, "Started") {
			t.Errorf("the journal of %s has no start:\n%s", unitName(u, r.RunDir), j)
		}
	}

	if err := Down(r.RunDir, t.Logf); err != nil {
		t.Fatalf("down: %v", err)
	}
	downed = true
	for _, u := range []string{UnitFabric, UnitDevice} {
		name := unitName(u, r.RunDir)
		if got := systemctlShow(t, name, "ActiveState"); got != "inactive" {
			t.Errorf("after down, %s is %s:\n%s", name, got, journal(u, r.RunDir))
		}
	}
	for _, pid := range []int{st.FabricPID, st.DevicePID} {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("after down, pid %d is still there", pid)
		}
	}
}

// systemctlShow is a unit's property.
func systemctlShow(t *testing.T, name, prop string) string {
	t.Helper()
	out, err := exec.Command("systemctl", "show", "--property="+prop, "--value", name).CombinedOutput()
	if err != nil {
		t.Fatalf("systemctl show %s: %v: %s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// journal is the journal of the unit of template for runDir.
func journal(template, runDir string) string {
	out, _ := exec.Command("journalctl", "--no-pager", "-n", "40", "-u", unitName(template, runDir)).CombinedOutput()
	return string(out)
}
