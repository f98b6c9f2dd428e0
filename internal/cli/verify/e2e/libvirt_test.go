package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
)

// TestLibvirtRack deploys testdata/racks/libvirt.yaml through a real
// libvirtd: a HiNIC guest (its vNIC a <shmem> ivshmem-doorbell on the
// device backend, its RAM the backend's file) and a Soft-RoCE guest
// (its data NIC a -netdev stream the fabric dials) as libvirt domains
// on one switch. It checks the domains, deploy status (the domains'
// state, both ports ACTIVE) and exec, runs the gate's ibv_devinfo,
// ibv_rc_pingpong and data_integrity from the rxe guest to the HiNIC
// guest, takes the rack down, and checks that libvirt has no domain of
// the rack left. It uses the system libvirtd if one answers at
// qemu:///system, else starts Debian's libvirtd and virtlogd itself
// and stops them at the end. It boots two QEMU guests under TCG and
// runs only as root with HINIC_LIBVIRT_IMAGE, an image with the HiNIC
// guest packages (scripts/e2e.sh builds one).
func TestLibvirtRack(t *testing.T) {
	img := envImage(t, "HINIC_LIBVIRT_IMAGE",
		"boots two libvirt domains for minutes; set HINIC_LIBVIRT_IMAGE to an image with the HiNIC guest packages",
		"needs root: libvirt's qemu:///system", " (Debian's libvirt-daemon-system and libvirt-clients)", "virsh", "libvirtd", "virtlogd")
	const uri = "qemu:///system"
	startLibvirtd(t, uri)

	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bin := buildHinic(t, root)
	r, err := deploy.ReadRack(filepath.Join(root, "testdata", "racks", "libvirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Its own name: the domains of a hand-deployed libvirt.yaml are
	// hinic-lv-*, this test's hinic-lvtest-*.
	r.Name = "lvtest"
	r.Image = img
	runDir, err := os.MkdirTemp("", "hnlv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runDir)
	r.RunDir = runDir
	r.BootTimeout.Duration = 15 * time.Minute

	st, err := deploy.Up(ctx, r, deploy.UpOptions{Hinic: bin, Progress: t.Logf})
	defer func() {
		downAndCheck(t, runDir)
		out, err := exec.Command("virsh", "-c", uri, "list", "--all", "--name").Output()
		if err != nil {
			t.Fatalf("virsh list: %v", err)
		}
		if strings.Contains(string(out), "hinic-lvtest-") {
			t.Errorf("domains of the rack left after deploy down:\n%s", out)
		}
		checkLeftovers(t, uri, runDir)
	}()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range st.Guests {
		want := "hinic-lvtest-" + g.Name
		if g.Domain != want || g.Libvirt != uri {
			t.Errorf("guest %s: domain %q through %q, want %q through %s", g.Name, g.Domain, g.Libvirt, want, uri)
		}
		out, err := exec.Command("virsh", "-c", uri, "domstate", want).Output()
		if err != nil || strings.TrimSpace(string(out)) != "running" {
			t.Errorf("virsh domstate %s: %q, %v", want, out, err)
		}
	}

	out := runHinic(t, bin, "deploy", "status", "--run-dir", runDir, "-o", "json")
	var rs deploy.RackStatus
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if rs.Fabric != "running" || rs.Device != "running" {
		t.Errorf("status: fabric %s, device %s", rs.Fabric, rs.Device)
	}
	for _, g := range rs.Guests {
		if g.State != "running" || g.Domain != "hinic-lvtest-"+g.Name {
			t.Errorf("status: guest %+v", g)
		}
	}
	if got := string(runHinic(t, bin, "deploy", "exec", "--run-dir", runDir, "vm-b", "--", "hostname")); strings.TrimSpace(got) != "vm-b" {
		t.Errorf("deploy exec vm-b hostname: %q", got)
	}

	// The gate: vm-a (HiNIC) serves, vm-b (Soft-RoCE) is the client.
	// libvirt's QEMUs are found by their pid files and metered as
	// deploy's own are.
	runGateCases(ctx, t, st, []string{"ibv_devinfo", "ibv_rc_pingpong", "data_integrity"},
		[]string{"backend", "qemu:vm-a", "qemu:vm-b"})
}

// startLibvirtd makes sure a libvirtd answers at uri: the host's, or
// Debian's libvirtd and virtlogd started here as children (no systemd
// to start them), stopped when the test ends.
func startLibvirtd(t *testing.T, uri string) {
	t.Helper()
	answers := func() bool { return exec.Command("virsh", "-c", uri, "version").Run() == nil }
	if answers() {
		t.Logf("libvirtd: the host's, at %s", uri)
		return
	}
	dir := t.TempDir()
	for _, d := range []struct{ name, sock string }{
		{"virtlogd", "/run/libvirt/virtlogd-sock"},
		{"libvirtd", "/run/libvirt/libvirt-sock"},
	} {
		log, err := os.Create(filepath.Join(dir, d.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(d.name, "--pid-file", filepath.Join(dir, d.name+".pid"))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", d.name, err)
		}
		t.Logf("%s: started (pid %d, log %s)", d.name, cmd.Process.Pid, log.Name())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		for i := 0; ; i++ {
			if _, err := os.Stat(d.sock); err == nil {
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(log.Name())
				t.Fatalf("%s exited: %s", d.name, b)
			case <-time.After(100 * time.Millisecond):
			}
			if i == 300 {
				t.Fatalf("%s did not open %s in 30 s", d.name, d.sock)
			}
		}
	}
	for i := 0; !answers(); i++ {
		if i == 100 {
			t.Fatalf("libvirtd does not answer at %s", uri)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLeftovers checks what deploy down does with a domain of a
// rack's guest's name that is left over: one with the rack's metadata
// (a dead run's, defined again here from the XML deploy wrote) is
// undefined, one without is reported and left alone.
func checkLeftovers(t *testing.T, uri, runDir string) {
	t.Helper()
	const dom = "hinic-lvtest-vm-a"
	virsh := func(args ...string) (string, error) {
		out, err := exec.Command("virsh", append([]string{"-c", uri}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := virsh("define", filepath.Join(runDir, "vm-a", deploy.FileDomainXML)); err != nil {
		t.Fatalf("virsh define: %v\n%s", err, out)
	}
	if err := deploy.Down(runDir, t.Logf); err != nil {
		t.Errorf("deploy down with the rack's own domain left over: %v", err)
	}
	if out, err := virsh("domstate", dom); err == nil {
		t.Errorf("deploy down left the rack's domain %s defined (%s)", dom, strings.TrimSpace(out))
	}

	foreign := filepath.Join(t.TempDir(), "foreign.xml")
	x := "<domain type='qemu'><name>" + dom + "</name><memory unit='MiB'>64</memory>" +
		"<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>"
	if err := os.WriteFile(foreign, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := virsh("define", foreign); err != nil {
		t.Fatalf("virsh define: %v\n%s", err, out)
	}
	defer virsh("undefine", dom)
	err := deploy.Down(runDir, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "libvirt domain "+dom+" exists (shut off) and it has no hinic metadata") {
		t.Errorf("deploy down with a foreign domain %s: %v", dom, err)
	}
	if _, err := virsh("domstate", dom); err != nil {
		t.Errorf("deploy down removed the foreign domain %s", dom)
	}
}
