package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/testutil"
)

// smokeVector is the x86 interrupt vector the guest script programs
// into MSI-X table entry 0. No driver owns it, so its arrival shows up as
// the kernel's "No irq handler for vector" message: an interrupt from
// the backend reached the guest CPU without any HiNIC driver.
const smokeVector = 0xdf

// TestQEMUSmoke boots the Debian kernel with a busybox initramfs in QEMU
// TCG, with ivshmem-doorbell connected to the backend and guest RAM shared
// through a file. The guest reads BAR2's device header (its address from
// sysfs resource), checks the magic and the virtual PCI identity, does
// the driver-ready handshake by hand (MSI-X enabled through sysfs config,
// table entry through devmem), rings the control doorbell, sees the
// device go LIVE and receives the interrupt the backend raises.
func TestQEMUSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, _, busybox := testutil.GuestBoot(t)

	dir, err := os.MkdirTemp("", "hdq")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const ramSize = 256 << 20
	cfg := device.VNICConfig{Name: "smoke", Socket: filepath.Join(dir, "ivshmem.sock"),
		RAMPath: filepath.Join(dir, "guest.ram"), RAMSize: ramSize, Machine: device.MachineQ35, Vectors: 4,
		MAC: [6]byte{0x02, 0x48, 0x4e, 0, 0, 0x42}}
	srv, err := device.Start(context.Background(), device.Config{VNICs: []device.VNICConfig{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	initrd := filepath.Join(dir, "initrd.cpio")
	if err := writeInitramfs(initrd, busybox, smokeInit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-accel", "tcg", "-machine", "q35,memory-backend=ram0", "-m", "256M",
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=256M,mem-path=%s,share=on", cfg.RAMPath),
		"-chardev", "socket,path="+cfg.Socket+",id=ivs0",
		"-device", "ivshmem-doorbell,chardev=ivs0,vectors=4",
		"-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-monitor", "none", "-smp", "1",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4 smokevector="+fmt.Sprint(smokeVector),
	)
	childproc.Tie(cmd) // a killed test run takes the guest along
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out testutil.LockedBuffer
	markers := map[string]chan struct{}{"HICAIN-DONE": make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteLine(sc.Text())
			if strings.Contains(sc.Text(), "HICAIN-DONE") {
				close(markers["HICAIN-DONE"])
			}
		}
	}()
	defer func() {
		childproc.KillGroup(cmd)
		cmd.Wait()
		pw.Close()
		if t.Failed() {
			t.Logf("guest console:\n%s", out.String())
		}
	}()
	select {
	case <-markers["HICAIN-DONE"]:
	case <-ctx.Done():
		t.Fatal("guest did not finish")
	}
	console := out.String()
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, "HICAIN-") || strings.Contains(l, "irq handler") {
			t.Log(strings.TrimSpace(l))
		}
	}
	for _, want := range []string{
		fmt.Sprintf("HICAIN-MAGIC 0x%08X", device.Magic),
		fmt.Sprintf("HICAIN-IDS 0x%04X%04X", device.DeviceID, device.VendorID),
		"HICAIN-IVPOS 0x00000001",
		"HICAIN-LIVE",
		"HICAIN-IRQ-OK",
	} {
		if !strings.Contains(console, want) {
			t.Errorf("guest console lacks %q", want)
		}
	}
	st := srv.Status().VNICs[0]
	if st.Counters.Doorbells == 0 || st.Counters.Interrupts == 0 || st.State != "live" {
		t.Errorf("backend saw doorbells %d, raised interrupts %d, state %s", st.Counters.Doorbells,
			st.Counters.Interrupts, st.State)
	}
}

// smokeInit is the guest's /init. BAR addresses come from sysfs
// resource (lines 1-3 are BAR0-2); the device header and BAR0 are read
// with devmem (sysfs resourceN of a memory BAR supports only mmap).
const smokeInit = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
vec=$(sed 's/.*smokevector=\([0-9]*\).*/\1/' /proc/cmdline)
dev=
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ]; then dev=$d; fi
done
if [ -z "$dev" ]; then echo HICAIN-NODEV; echo HICAIN-DONE; poweroff -f; fi
bar0=$(sed -n 1p $dev/resource | cut -d' ' -f1)
bar1=$(sed -n 2p $dev/resource | cut -d' ' -f1)
bar2=$(sed -n 3p $dev/resource | cut -d' ' -f1)
echo HICAIN-BARS $bar0 $bar1 $bar2
echo HICAIN-MAGIC $(devmem $((bar2)) 32)
echo HICAIN-IDS $(devmem $((bar2 + 8)) 32)
echo HICAIN-IVPOS $(devmem $((bar0 + 8)) 32)
# MSI-X table entry 0: LAPIC of CPU 0, vector $vec, unmasked.
devmem $((bar1)) 32 0xfee00000
devmem $((bar1 + 4)) 32 0
devmem $((bar1 + 8)) 32 $vec
devmem $((bar1 + 12)) 32 0
# PCI command: memory space and bus master; MSI-X control (cap at
# 0x40): enable, function unmasked.
printf '\006\000' | dd of=$dev/config bs=1 seek=4 conv=notrunc 2>/dev/null
printf '\003\200' | dd of=$dev/config bs=1 seek=66 conv=notrunc 2>/dev/null
# Driver-ready handshake: driver_abi, driver_status = OK|MSIX_ON, then
# the control doorbell (backend peer 0, vector 0).
devmem $((bar2 + 0x90)) 32 0x00010000
devmem $((bar2 + 0x84)) 32 3
devmem $((bar0 + 12)) 32 0
i=0
while [ $i -lt 200 ]; do
	s=$(devmem $((bar2 + 0x80)) 32)
	if [ $((s & 2)) -ne 0 ]; then echo HICAIN-LIVE $s; break; fi
	i=$((i + 1))
	usleep 10000
done
sleep 1
if dmesg | grep -q "No irq handler for vector"; then echo HICAIN-IRQ-OK; else echo HICAIN-IRQ-NONE; dmesg | tail -5; fi
echo HICAIN-DONE
poweroff -f
`

// writeInitramfs writes the smoke guest's initramfs: busybox as /init's
// shell and the directories it mounts on.
func writeInitramfs(path, busybox, init string) error {
	w, err := testutil.BusyboxInitramfs(busybox, init, "proc", "sys", "usr", "usr/bin", "usr/sbin", "sbin")
	if err != nil {
		return err
	}
	return os.WriteFile(path, w.Bytes(), 0o644)
}
