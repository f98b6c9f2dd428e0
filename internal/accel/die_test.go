package accel

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/testutil"
)

// probeChildEnv makes a test binary the child of TestProbeQEMUDiesWithParent.
const probeChildEnv = "HINIC_TEST_PROBE_CHILD"

// qemuComm is qemu-system-x86_64's command name (/proc/PID/comm keeps
// 15 bytes).
const qemuComm = "qemu-system-x86"

// TestProbeQEMUChild is the child of TestProbeQEMUDiesWithParent: it
// starts a probe QEMU the way BootKernel does (bootWith) and waits in it
// until it is killed. Without the parent's environment it skips.
func TestProbeQEMUChild(t *testing.T) {
	qemu := os.Getenv(probeChildEnv)
	if qemu == "" {
		t.Skip("the child of TestProbeQEMUDiesWithParent")
	}
	// Under KVM the probe boots a kernel that ends in a second; this
	// host may have none, so TCG, and no kernel: the firmware finds
	// nothing to boot and QEMU runs on, as a hung probe guest does.
	bootWith(context.Background(), qemu, 5*time.Minute, TCG)
	t.Fatal("the probe QEMU ended before the parent killed this process")
}

// TestProbeQEMUDiesWithParent: a process running a KVM probe is killed
// with SIGKILL, as a killed `make test` or `hinic deploy rack` is. Its
// QEMU must die too. Before, it was tied to nothing and ran on (a hung
// probe guest spun at 73 % CPU after a killed test run); now the kernel
// kills it with its parent (Pdeathsig). It runs the real
// qemu-system-x86_64, under TCG, through the probe's own launcher.
func TestProbeQEMUDiesWithParent(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	testutil.RequireTool(t, "qemu-system-x86_64", "apt-get install qemu-system-x86", err == nil)
	child := exec.Command(os.Args[0], "-test.run=^TestProbeQEMUChild$", "-test.v")
	child.Env = append(os.Environ(), probeChildEnv+"="+qemu)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		if kids := testutil.Children(child.Process.Pid, qemuComm); len(kids) > 0 {
			pid = kids[0]
		} else if time.Now().After(deadline) {
			t.Fatal("the child started no QEMU in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Whatever happens, this test leaves no QEMU behind.
	defer syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond) // QEMU is up, running its firmware
	if !testutil.Running(pid, qemuComm) {
		t.Fatalf("the probe QEMU %d ended before its parent was killed", pid)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	for deadline := time.Now().Add(10 * time.Second); testutil.Running(pid, qemuComm); {
		if time.Now().After(deadline) {
			t.Fatalf("the probe QEMU %d still runs 10 s after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
