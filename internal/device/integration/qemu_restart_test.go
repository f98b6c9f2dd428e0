package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/qmp"
	"github.com/PacketFive/hinic/internal/testutil"
)

// backendEnv carries the vNIC configuration (JSON) to TestBackendProcess.
const backendEnv = "HINIC_TEST_BACKEND"

// TestBackendProcess is not a test: run by startBackendProcess in a
// child process of its own, it serves the vNICs of $HINIC_TEST_BACKEND
// until killed, so that a test can kill a backend as a crash would.
func TestBackendProcess(t *testing.T) {
	cfg := os.Getenv(backendEnv)
	if cfg == "" {
		t.Skip("a backend for TestQEMUBackendRestart")
	}
	var vnics []device.VNICConfig
	if err := json.Unmarshal([]byte(cfg), &vnics); err != nil {
		t.Fatal(err)
	}
	srv, err := device.Start(context.Background(), device.Config{VNICs: vnics})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("BACKEND-READY")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Close()
}

// startBackendProcess runs the vNICs in a backend process of their own
// and waits until it serves them (their sockets listen).
func startBackendProcess(t *testing.T, vnics ...device.VNICConfig) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(vnics)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), os.Args[0], "-test.run=^TestBackendProcess$", "-test.v")
	cmd.Env = append(os.Environ(), backendEnv+"="+string(b))
	childproc.Tie(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		buf := make([]byte, 4096)
		var seen string
		for {
			n, err := out.Read(buf)
			seen += string(buf[:n])
			if strings.Contains(seen, "BACKEND-READY") {
				ready <- true
				seen = ""
			}
			if err != nil {
				ready <- false
				return
			}
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("backend process exited before it served")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("backend process did not start serving")
	}
	return cmd
}

// restartGuestInit is /init of TestQEMUBackendRestart's guest: the
// modules, the netdev at 10.42.0.1, a process holding the verbs device
// open (ibv_hold), then the dead state once the host killed the
// backend, the old function released while ibv_hold still holds it,
// and the new function: netdev, port ACTIVE and a PD allocated on it.
const restartGuestInit = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp/2
touch /tmp/2/release
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
for m in $(cat /lib/modules/load-order); do
	insmod /lib/modules/$m || echo HICAIN-INSMOD-FAIL $m
done
insmod /hicain_net.ko || echo HICAIN-INSMOD-FAIL hicain_net
insmod /hicain_ib.ko || echo HICAIN-INSMOD-FAIL hicain_ib
# up: the netdev of the bound function configured (as deploy's setup
# does), then the port ACTIVE; nd and dev name them.
up() {
	i=0
	until nd=$(ls /sys/bus/pci/drivers/hicain_net/*/net/ 2>/dev/null | head -1) && [ -n "$nd" ]; do
		i=$((i + 1)); [ $i -ge 600 ] && return 1
		usleep 100000
	done
	ip link set $nd up && ip addr add 10.42.0.1/24 dev $nd
	i=0
	until dev=$(ls /sys/class/infiniband/ 2>/dev/null | head -1) && [ -n "$dev" ] &&
		ibv_devinfo -d $dev 2>/dev/null | grep -q PORT_ACTIVE; do
		i=$((i + 1)); [ $i -ge 600 ] && return 1
		usleep 100000
	done
	echo HICAIN-NET $nd $dev carrier=$(cat /sys/class/net/$nd/carrier)
}
up || echo HICAIN-NOT-UP
/ibv_hold $dev /tmp &
hold=$!
i=0
until [ -e /tmp/held ]; do
	i=$((i + 1)); [ $i -ge 300 ] && break
	usleep 100000
done
echo HICAIN-UP
# The host kills the backend; the watchdog's verdict follows.
i=0
until dmesg | grep -q 'device dead until removed'; do
	i=$((i + 1)); [ $i -ge 600 ] && break
	usleep 100000
done
echo HICAIN-DEAD carrier=$(cat /sys/class/net/$nd/carrier)
# A verb that needs the device fails at once on a dead one.
/ibv_hold $dev /tmp/2
echo HICAIN-DEAD-HOLD rc=$?
# What deploy restart device runs in the guest: the old function let go
# (QEMU 7.2 cannot remove it safely), never to be bound again. The
# unbind must not wait for ibv_hold, which holds its context.
bdf=$(basename $(readlink -f /sys/class/net/$nd/device))
echo none > /sys/bus/pci/devices/$bdf/driver_override
echo $bdf > /sys/bus/pci/drivers/hicain_net/unbind
kill -0 $hold 2>/dev/null && h=1 || h=0
echo HICAIN-GONE held=$h ib=$(ls /sys/class/infiniband/ | tr '\n' ' ')end
touch /tmp/release
wait $hold
echo HICAIN-HOLD-EXIT rc=$?
echo HICAIN-PLUG-ME
read -t 300 line
up || echo HICAIN-NOT-UP
# A verbs operation on the new device: a context and a PD.
/ibv_hold $dev /tmp/2
echo HICAIN-HOLD2-EXIT rc=$?
dmesg | grep -i -E 'hicain|infiniband|acpiphp|pci 0000:00:0|WARNING|BUG|Call Trace'
echo HICAIN-DONE
poweroff -f
`

// TestQEMUBackendRestart boots a guest under TCG on the pc machine (the
// racks' machine: ACPI PCI hotplug) whose HiNIC function is served by a
// backend in a process of its own, with a verbs process holding the
// device open. It kills the backend with SIGKILL: the driver's
// watchdog must find the heartbeat stopped and move the device to its
// dead state (carrier off, verbs failing at once, no admin command
// waiting out its timeout). The guest then unbinds the old function as
// deploy does, which must not wait for the verbs process
// (disassociate_ucontext). A new backend on the same RAM file serves a
// new function, which the test plugs in through QMP as deploy does
// (chardev-add, device_add beside the old one, which QEMU 7.2 cannot
// remove safely: qmp.Client.AddIvshmem); the driver must probe it, its
// port go ACTIVE and it serve verbs.
func TestQEMUBackendRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	tools := lookTools(t, "ibverbs-utils", "ibv_devinfo")
	netKo := buildModule(t, release)
	so, driver := buildProvider(t)
	hold := filepath.Join(t.TempDir(), "ibv_hold")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", hold, "testdata/ibv_hold.c",
		"-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("ibv_hold build: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "hdr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	cfg := device.VNICConfig{
		Name:       "vm1/hicain0",
		Socket:     filepath.Join(dir, "ivshmem.sock"),
		RAMPath:    filepath.Join(dir, "vm1.ram"),
		RAMSize:    256 << 20,
		Machine:    device.MachinePC,
		Vectors:    4,
		FabricPort: fab.Switches()[0].SocketPath(1),
		MAC:        [6]byte{0x02, 0x48, 0x4e, 0, 0, 1},
	}
	r, _ := verbsInitramfs(t, busybox, restartGuestInit, release, netKo, so, driver, "ib_core", "ib_uverbs")
	for _, p := range tools {
		r.AddFile(t, p, p, 0o755)
	}
	r.AddFile(t, "/ibv_hold", hold, 0o755)
	r.AddLibs(t, append([]string{hold, so}, tools...)...)
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, r.W.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	backend := startBackendProcess(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	ramMiB := cfg.RAMSize >> 20
	qmpSock := filepath.Join(dir, "qmp.sock")
	g := testutil.StartQEMU(t, ctx, "guest", "HICAIN-", qemu,
		"-accel", "tcg", "-machine", "pc,memory-backend=ram0", "-m", fmt.Sprintf("%dM", ramMiB),
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on", ramMiB, cfg.RAMPath),
		"-chardev", "socket,path="+cfg.Socket+",id=ivs0",
		"-device", fmt.Sprintf("ivshmem-doorbell,chardev=ivs0,vectors=%d,id=hicain0", cfg.Vectors),
		"-qmp", "unix:"+qmpSock+",server=on,wait=off",
		"-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-monitor", "none", "-smp", "1",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4")
	start := time.Now()
	g.Wait(ctx, t, "HICAIN-UP")
	t.Logf("guest up after %v", time.Since(start).Round(time.Second))
	mon, err := qmp.Dial(ctx, qmpSock)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	old, err := mon.PCIAddress(ctx, "hicain0")
	if err != nil {
		t.Fatal(err)
	}

	backend.Process.Signal(syscall.SIGKILL)
	backend.Wait()
	killed := time.Now()
	g.Wait(ctx, t, "HICAIN-PLUG-ME")
	t.Logf("dead state and release after %v", time.Since(killed).Round(time.Second))
	startBackendProcess(t, cfg)
	if err := mon.AddIvshmem(ctx, qmp.Ivshmem{ID: "hicain1", Chardev: "ivs1", Socket: cfg.Socket,
		Vectors: cfg.Vectors, Bus: "pci.0"}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(g.Stdin, "plugged")
	g.Wait(ctx, t, "HICAIN-DONE")
	t.Logf("recovered after %v", time.Since(killed).Round(time.Second))
	// The new function is beside the old, which stays, released.
	if a, err := mon.PCIAddress(ctx, "hicain1"); err != nil || a == old {
		t.Errorf("new function at %v (old %v): %v", a, old, err)
	}
	if _, err := mon.PCIAddress(ctx, "hicain0"); err != nil {
		t.Errorf("old function: %v", err)
	}

	con := g.Out.String()
	for _, l := range strings.Split(con, "\n") {
		if strings.Contains(l, "HICAIN-") || strings.Contains(l, "hicain") {
			t.Log(strings.TrimSpace(l))
		}
	}
	for _, want := range []string{
		"HICAIN-DEAD carrier=0", "HICAIN-HOLD-FAIL", "HICAIN-GONE held=1 ib=end",
		"HICAIN-HOLD-EXIT", "HICAIN-HOLD-READY port_state=4", "HICAIN-HOLD2-EXIT rc=0",
	} {
		if !strings.Contains(con, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	if n := strings.Count(con, "HICAIN-NET "); n != 2 {
		t.Errorf("the netdev came up %d times, want 2 (before and after the restart)", n)
	}
	for _, bad := range []string{"HICAIN-NOT-UP", "HICAIN-INSMOD-FAIL", "timed out", "WARNING", "BUG", "Call Trace"} {
		if strings.Contains(con, bad) {
			t.Errorf("console has %q", bad)
		}
	}
	if !regexp.MustCompile(`HICAIN-DEAD-HOLD rc=[1-9]`).MatchString(con) {
		t.Error("a verb on the dead device did not fail")
	}
}
