package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/testutil"
)

// unitsGuestRack is the one-guest rack TestHostUnits boots: a machine
// whose PID 1 is systemd.
const unitsGuestRack = `name: hunits
network: 10.72.0.0/24
ssh-port-base: 2540
switches:
  - name: sw0
    ports: 2
guests:
  - name: vm-a
    nic: rxe
    ip: 10.72.0.1
    mac: "52:54:00:72:00:01"
    port: 1
`

// TestHostUnits checks the host package's systemd units under a real
// systemd, which the machine that runs the tests may lack (a container's
// PID 1 is not systemd): it builds the hinic package (hinic pkg build
// --only hinic) and internal/deploy's test binary, boots a Debian guest
// from HINIC_UNITS_IMAGE (any image of hinic image build: its PID 1 is
// systemd), installs the package there with dpkg -i and runs
// TestUnitsUnderSystemd in it, as root: deploy's own code starts a
// libvirt host's fabric and device backend as hinic-fabric@ and
// hinic-device@ instances, checks them and takes them down. Then the
// package is purged, leaving no hinic unit loaded. About 3 minutes
// under TCG; root, and only with HINIC_UNITS_IMAGE.
func TestHostUnits(t *testing.T) {
	img := envImage(t, "HINIC_UNITS_IMAGE", "boots a QEMU guest; set HINIC_UNITS_IMAGE to a guest image (hinic image build)",
		"deploys a rack and builds packages: run as root", "", "dpkg-deb")
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bin := buildHinic(t, root)
	out := t.TempDir()
	build := exec.CommandContext(ctx, bin, "pkg", "build", "--only", "hinic", "--out", out)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("hinic pkg build --only hinic: %v\n%s", err, b)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "hinic_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("hinic pkg build made %v", debs)
	}
	testBin := filepath.Join(out, "deploy.test")
	gotest := exec.CommandContext(ctx, "go", "test", "-c", "-o", testBin, "./internal/deploy")
	gotest.Dir = root
	if b, err := gotest.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./internal/deploy: %v\n%s", err, b)
	}

	r, err := deploy.ParseRack([]byte(unitsGuestRack))
	if err != nil {
		t.Fatal(err)
	}
	r.Image = img
	r.RunDir = testutil.ShortTempDir(t, "hnu-")
	r.BootTimeout.Duration = 15 * time.Minute
	st, err := deploy.Up(ctx, r, deploy.UpOptions{Hinic: bin, Progress: t.Logf})
	defer downAndCheck(t, r.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Connect(ctx, &st.Guests[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// run runs cmd in the guest: its output, and whether it exited 0.
	run := func(cmd string) (string, bool) {
		t.Helper()
		out, err := c.Run(ctx, cmd)
		var re *deploy.RunError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return out, err == nil
	}
	for src, dst := range map[string]string{debs[0]: "/root/hinic.deb", testBin: "/root/deploy.test"} {
		if err := c.Upload(ctx, src, dst, "0755"); err != nil {
			t.Fatalf("copying %s into the guest: %v", filepath.Base(src), err)
		}
	}
	if o, ok := run("test -d /run/systemd/system && cat /proc/1/comm"); !ok || strings.TrimSpace(o) != "systemd" {
		t.Fatalf("the guest's PID 1 is not systemd: %q", o)
	}
	if o, ok := run("dpkg -i /root/hinic.deb 2>&1 && systemctl daemon-reload"); !ok {
		t.Fatalf("dpkg -i hinic:\n%s", o)
	}
	o, ok := run(deploy.EnvUnitsUnderSystemd + "=1 /root/deploy.test -test.run '^TestUnitsUnderSystemd$' -test.v -test.count=1 2>&1")
	t.Logf("in the guest:\n%s", o)
	if !ok || !strings.Contains(o, "--- PASS: TestUnitsUnderSystemd") {
		t.Fatal("TestUnitsUnderSystemd failed in the guest")
	}
	// Nothing of the rack's units left: no hinic instance loaded.
	if o, _ := run("systemctl list-units --all --plain --no-legend 'hinic-*@*'"); strings.TrimSpace(o) != "" {
		t.Errorf("units left after deploy down:\n%s", o)
	}
	if o, ok := run("dpkg --purge hinic 2>&1"); !ok {
		t.Errorf("dpkg --purge hinic:\n%s", o)
	}
}
