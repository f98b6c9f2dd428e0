package gpu_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/testutil"
)

// gpuGuestInit is /init of the HiGPU guest: higpu.ko binds both
// functions, then hicart-smi, hicart_test on each GPU and
// hicart-bandwidth run; each prints its exit status. The module
// unloads at the end: every file closed, every context freed.
const gpuGuestInit = guestInitHead + `insmod /higpu.ko && echo HIGPU-INSMOD-OK
sleep 1
ls /dev | grep higpu
hicart-smi; echo HIGPU-SMI rc=$?
hicart-smi --json; echo HIGPU-SMIJSON rc=$?
for d in 0 1; do
	hicart_test -d $d; echo HIGPU-TEST-$d rc=$?
done
hicart-bandwidth --size 1048576 --iters 4; echo HIGPU-BW rc=$?
hicart-bandwidth --size 65536 --iters 8 --json; echo HIGPU-BWJSON rc=$?
rmmod higpu && echo HIGPU-RMMOD-OK
dmesg | grep -i higpu
echo HIGPU-DONE
poweroff -f
`

// guestInitHead starts the /init of a HiGPU test guest: busybox, the
// kernel's file systems, libhicart on the library path.
const guestInitHead = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
export LD_LIBRARY_PATH=/usr/lib/hicart:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
`

// hicartInitrd writes the initramfs of a HiGPU test guest to path: init,
// higpu.ko from kdir, the programs bins of the hicart build hc with
// libhicart and the host libraries they need.
func hicartInitrd(t *testing.T, path, busybox, init, kdir, hc string, bins []string) {
	t.Helper()
	r := testutil.NewInitramfs(t, busybox, init)
	r.AddFile(t, "/higpu.ko", filepath.Join(kdir, "higpu.ko"), 0o644)
	var hostBins []string
	for _, b := range bins {
		r.AddFile(t, "/usr/bin/"+b, filepath.Join(hc, b), 0o755)
		hostBins = append(hostBins, filepath.Join(hc, b))
	}
	r.AddFile(t, "/usr/lib/hicart/libhicart.so.1", filepath.Join(hc, "libhicart.so.1"), 0o755)
	// ldd finds libhicart next to the tools; the guest has it in
	// /usr/lib/hicart, so only the system's libraries are copied.
	t.Setenv("LD_LIBRARY_PATH", hc)
	for _, lib := range testutil.SharedLibs(t, hostBins...) {
		if !strings.HasPrefix(lib, hc) {
			r.AddFile(t, lib, lib, 0o755)
		}
	}
	if err := os.WriteFile(path, r.W.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gpuGuestArgs are QEMU's arguments for a TCG guest of ramMiB on the RAM
// file ram with a HiGPU function on each ivshmem socket.
func gpuGuestArgs(ramMiB int, ram, kernel, initrd string, sockets ...string) []string {
	args := []string{"-accel", "tcg", "-machine", "q35,memory-backend=ram0", "-m", fmt.Sprintf("%dM", ramMiB),
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on", ramMiB, ram),
		"-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-monitor", "none", "-smp", "1",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 panic=-1 loglevel=4"}
	for i, sock := range sockets {
		args = append(args, "-chardev", fmt.Sprintf("socket,path=%s,id=gpu%d", sock, i),
			"-device", fmt.Sprintf("ivshmem-doorbell,chardev=gpu%d,vectors=%d", i, gpu.DefaultVectors))
	}
	return args
}

// buildHicart builds libhicart and its tools from a copy of hicart/ and
// the kernel headers it includes (the tree stays clean) and returns the
// directory that holds them.
func buildHicart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"hicart", "kernel"} {
		if out, err := exec.Command("cp", "-r", filepath.Join("../..", d), dir).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", d, err, out)
		}
	}
	hc := filepath.Join(dir, "hicart")
	if out, err := exec.Command("make", "-C", hc, "clean").CombinedOutput(); err != nil {
		t.Fatalf("make clean: %v\n%s", err, out)
	}
	if out, err := exec.Command("make", "-C", hc).CombinedOutput(); err != nil {
		t.Fatalf("hicart build: %v\n%s", err, out)
	}
	return hc
}

// TestQEMUHicart boots a TCG guest with two HiGPUs (gpu_id 0 and 5)
// served by the backend in this process, loads higpu.ko, and runs the
// runtime's own programs on them: hicart-smi lists both, hicart_test
// covers allocation, every copy kind, streams and events, every built-in
// kernel against a CPU result and the error paths (a copy beyond an
// allocation, a freed pointer, exhausted memory, a launch on another
// process's memory, a process killed mid-stream) on each GPU, and
// hicart-bandwidth measures H2D, D2H and D2D against the guest's memcpy.
// The module unloads cleanly, the backend served commands with no fatal
// state, and the console has no kernel warning.
func TestQEMUHicart(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	kdir := testutil.BuildModules(t, release, "../../kernel", "higpu.o", "higpu.ko")
	hc := buildHicart(t)

	dir := shortDir(t)
	const ramMiB = 512
	ram := filepath.Join(dir, "ram")
	var cfgs []gpu.GPUConfig
	for i, id := range []int{0, 5} {
		cfgs = append(cfgs, gpu.GPUConfig{ID: id, Name: fmt.Sprintf("HiGPU-%d", id),
			Socket: filepath.Join(dir, fmt.Sprintf("g%d.sock", i)), RAMPath: ram, RAMSize: ramMiB << 20,
			Machine: "q35", MemSize: 256 << 20, Vectors: gpu.DefaultVectors})
	}
	srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: cfgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	initrd := filepath.Join(dir, "initrd.cpio")
	hicartInitrd(t, initrd, busybox, gpuGuestInit, kdir, hc, []string{"hicart-smi", "hicart_test", "hicart-bandwidth"})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := testutil.StartQEMU(t, ctx, "higpu guest", "HIGPU-", qemu,
		gpuGuestArgs(ramMiB, ram, kernel, initrd, cfgs[0].Socket, cfgs[1].Socket)...)
	g.Wait(ctx, t, "HIGPU-DONE")
	con := g.Out.String()
	for _, l := range strings.Split(con, "\n") {
		if strings.Contains(l, "HIGPU-") || strings.Contains(l, "ok ") || strings.Contains(l, "not ok") ||
			strings.Contains(l, "GB/s") || strings.Contains(l, "memcpy") || strings.Contains(l, "higpu") {
			t.Logf("%s", strings.TrimSpace(l))
		}
	}
	for _, want := range []string{"HIGPU-INSMOD-OK", "HIGPU-SMI rc=0", "HIGPU-SMIJSON rc=0", "HIGPU-TEST-0 rc=0",
		"HIGPU-TEST-1 rc=0", "HIGPU-BW rc=0", "HIGPU-BWJSON rc=0", "HIGPU-RMMOD-OK", "higpu0", "higpu5"} {
		if !strings.Contains(con, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "not ok "} {
		if strings.Contains(con, bad) {
			t.Errorf("console has %q", bad)
		}
	}
	// Both GPUs served the programs, none went fatal, and the unload
	// left no context or allocation behind.
	for _, gs := range srv.Status().GPUs {
		t.Logf("gpu %d: state %s, %d commands, %d errors, %d kernels, H2D %d B, D2H %d B",
			gs.ID, gs.State, gs.Counters.Commands, gs.Counters.Errors, gs.Counters.Kernels,
			gs.Counters.BytesH2D, gs.Counters.BytesD2H)
		if gs.FatalCode != 0 || gs.Counters.Commands == 0 || gs.Counters.Kernels == 0 ||
			gs.Counters.BytesH2D == 0 || gs.Counters.BytesD2H == 0 {
			t.Errorf("gpu %d: %+v", gs.ID, gs)
		}
		if gs.Contexts != 0 || gs.Allocs != 0 || gs.MemUsed != 0 {
			t.Errorf("gpu %d: %d contexts, %d allocations, %d bytes left after the unload",
				gs.ID, gs.Contexts, gs.Allocs, gs.MemUsed)
		}
	}
}
