package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/testutil"
)

// lookTools returns the paths of the named programs, which Debian's
// package pkg installs, skipping the test when one is missing.
func lookTools(t *testing.T, pkg string, names ...string) []string {
	t.Helper()
	var paths []string
	for _, b := range names {
		p, err := exec.LookPath(b)
		testutil.RequireTool(t, b, "apt-get install "+pkg, err == nil)
		paths = append(paths, p)
	}
	return paths
}

// buildModule builds every module of kernel/Kbuild (see buildModules)
// and returns the path of hicain_net.ko; the others sit next to it.
func buildModule(t *testing.T, release string) string {
	t.Helper()
	return buildModules(t, release, "")
}

// buildModules builds the modules of kernel/Kbuild from a copy of
// kernel/ (the source tree stays clean) against the headers of release
// and returns the path of hicain_net.ko. With only set, the copy's Kbuild
// keeps that one module (e.g. "hicain_net.o"). The Kbuild file has
// -Werror: a warning fails the build.
func buildModules(t *testing.T, release, only string) string {
	t.Helper()
	return filepath.Join(testutil.BuildModules(t, release, "../../../kernel", only, "hicain_net.ko"), "hicain_net.ko")
}

// TestKernelBuild builds every guest module of kernel/Kbuild against the
// guest kernel's headers with -Werror, so that a change that breaks one
// fails `go test` even where QEMU tests are skipped.
func TestKernelBuild(t *testing.T) {
	_, release := testutil.GuestKernel(t)
	ko := buildModule(t, release)
	out, err := exec.Command("modinfo", "-F", "vermagic", ko).Output()
	if err == nil && !strings.HasPrefix(string(out), release+" ") {
		t.Errorf("vermagic %q, want the guest kernel %s", strings.TrimSpace(string(out)), release)
	}
}

// netGuestInit is /init of the ping guests. The kernel command line
// carries the role (1 pings, 2 answers), the address and the peer. The
// test writes a line to a guest's console to let it go on: guest 1 pings
// again after the test broke guest 2's device, guest 2 unloads when guest
// 1 is done.
const netGuestInit = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
role=$(arg hicain.role)
ip=$(arg hicain.ip)
peer=$(arg hicain.peer)
echo 7 > /proc/sys/kernel/printk
up() {
	insmod /hicain_net.ko || echo HICAIN-INSMOD-FAIL
	# The device's limit is a 9000-byte jumbo frame.
	ip link set eth0 mtu 9001 2>/dev/null && echo HICAIN-MTU-OVER-LIMIT
	ip link set eth0 mtu 9000 || echo HICAIN-MTU-JUMBO-FAIL
	ip link set eth0 mtu 4000
	ip link set eth0 up && ip addr add $ip/24 dev eth0
	i=0
	while [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ] && [ $i -lt 100 ]; do
		usleep 100000; i=$((i + 1))
	done
}
reach() {
	i=0
	until ping -c 1 -W 1 $peer >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -ge 60 ]; then echo HICAIN-PEER-UNREACHABLE; break; fi
	done
}
up
echo HICAIN-UP $ip carrier=$(cat /sys/class/net/eth0/carrier) mtu=$(cat /sys/class/net/eth0/mtu)
if [ "$role" = 1 ]; then
	reach
	ping -c 3 $peer && echo HICAIN-PING-OK
	ping -c 3 -s 1400 $peer && echo HICAIN-BIGPING-OK
	ping -c 3 -s 3900 $peer && echo HICAIN-JUMBOPING-OK
	# A few MB over TCP: the rings wrap many times.
	mkdir -p /tmp && seq 1 500000 > /tmp/data
	echo HICAIN-TXSUM $(md5sum < /tmp/data | cut -d' ' -f1)
	nc $peer 5000 < /tmp/data && echo HICAIN-NC-OK
	echo HICAIN-PINGS-DONE
	read -t 150 line
	reach
	ping -c 3 $peer && echo HICAIN-PING2-OK
	echo HICAIN-PING2-DONE
	ip link set eth0 down
else
	nc -l -p 5000 -e /rxsum < /dev/null &
	read -t 150 line
fi
for f in rx_packets tx_packets rx_errors tx_errors rx_dropped tx_dropped; do
	echo HICAIN-STAT $f $(cat /sys/class/net/eth0/statistics/$f)
done
rmmod hicain_net && echo HICAIN-RMMOD-OK
if [ "$role" = 2 ]; then
	# Load again on the device the first instance left behind.
	up
	echo HICAIN-REPROBE carrier=$(cat /sys/class/net/eth0/carrier)
	rmmod hicain_net && echo HICAIN-RMMOD2-OK
fi
# The driver reset the device on remove: READY and LINK_UP, not LIVE,
# and no driver status. BAR2 is free for devmem again.
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ]; then
		bar2=$(sed -n 3p $d/resource | cut -d' ' -f1)
		echo HICAIN-AFTER dev_status=$(devmem $((bar2 + 0x80)) 32) driver_status=$(devmem $((bar2 + 0x84)) 32)
	fi
done
dmesg | grep -i hicain
echo HICAIN-DONE
poweroff -f
`

// rxSum is the TCP server's program in guest 2: the checksum of what
// arrived, on the console.
const rxSum = `#!/bin/sh
echo HICAIN-RXSUM $(md5sum | cut -d' ' -f1) > /dev/console
`

// startGuest boots a guest with cfg's vNIC, kernel command line args
// and any further QEMU arguments (extra).
func startGuest(t *testing.T, ctx context.Context, name, qemu, kernel, initrd string, cfg device.VNICConfig,
	args string, extra ...string) *testutil.QEMU {
	t.Helper()
	ramMiB := cfg.RAMSize >> 20
	qargs := []string{
		"-accel", "tcg", "-machine", "q35,memory-backend=ram0", "-m", fmt.Sprintf("%dM", ramMiB),
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on", ramMiB, cfg.RAMPath),
		"-chardev", "socket,path=" + cfg.Socket + ",id=ivs0",
		"-device", fmt.Sprintf("ivshmem-doorbell,chardev=ivs0,vectors=%d", cfg.Vectors),
		"-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-monitor", "none", "-smp", "1",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4 " + args,
	}
	return testutil.StartQEMU(t, ctx, name, "HICAIN-", qemu, append(qargs, extra...)...)
}

// TestQEMUNetPing boots two Debian guests under TCG, each with a HiNIC
// vNIC on one HiSwitch, loads hicain_net.ko in both, and pings from one
// to the other through the driver's L2 rings, the backend and the
// switch, with payloads up to a 4000-byte MTU, then sends a few MB over
// TCP. It breaks guest 2's device (fatal), checks that the driver
// resets it and the ping works again, and unloads the module in both:
// the device must be back to READY and the consoles free of oopses.
func TestQEMUNetPing(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	ko := buildModules(t, release, "hicain_net.o")

	// Cleanups run last in, first out: the guests stop before the
	// backend, the backend before the switch. A short directory keeps
	// the socket paths well within sun_path.
	srv, cfgs, dir := startTwoVNICs(t, "hdn")

	koBytes, err := os.ReadFile(ko)
	if err != nil {
		t.Fatal(err)
	}
	w, err := testutil.BusyboxInitramfs(busybox, netGuestInit, "proc", "sys", "usr", "usr/bin", "usr/sbin", "sbin")
	if err != nil {
		t.Fatal(err)
	}
	w.File("hicain_net.ko", 0o644, koBytes)
	w.File("rxsum", 0o755, []byte(rxSum))
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	start := time.Now()
	g2 := startGuest(t, ctx, "guest 2", qemu, kernel, initrd, cfgs[1],
		"hicain.role=2 hicain.ip=10.42.0.2 hicain.peer=10.42.0.1")
	g1 := startGuest(t, ctx, "guest 1", qemu, kernel, initrd, cfgs[0],
		"hicain.role=1 hicain.ip=10.42.0.1 hicain.peer=10.42.0.2")

	g1.Wait(ctx, t, "HICAIN-UP")
	g2.Wait(ctx, t, "HICAIN-UP")
	t.Logf("both guests up after %v", time.Since(start).Round(time.Second))
	g1.Wait(ctx, t, "HICAIN-PINGS-DONE")
	g2.Wait(ctx, t, "HICAIN-RXSUM")
	t.Logf("pings and TCP transfer done after %v", time.Since(start).Round(time.Second))
	before := srv.Status()

	// Break guest 2's device: an L2 RX producer index beyond the ring
	// makes the backend declare it fatal at the next frame. The driver
	// must reset it, and guest 1 reach guest 2 again.
	breakRxIndex(t, srv, 1, g2.Cmd.Process.Pid, cfgs[1].MAC)
	fmt.Fprintln(g1.Stdin, "go")
	g1.Wait(ctx, t, "HICAIN-PING2-DONE")
	t.Logf("pings after the reset done after %v", time.Since(start).Round(time.Second))
	fmt.Fprintln(g2.Stdin, "go")
	g1.Wait(ctx, t, "HICAIN-DONE")
	g2.Wait(ctx, t, "HICAIN-DONE")
	t.Logf("both guests done after %v", time.Since(start).Round(time.Second))
	after := srv.Status()

	c1, c2 := g1.Out.String(), g2.Out.String()
	clean := "HICAIN-AFTER dev_status=0x00000009 driver_status=0x00000000"
	for _, want := range []string{
		"HICAIN-UP 10.42.0.1 carrier=1 mtu=4000", "HICAIN-PING-OK", "HICAIN-BIGPING-OK",
		"HICAIN-JUMBOPING-OK", "HICAIN-PING2-OK", "64 bytes from 10.42.0.2", "1408 bytes from 10.42.0.2",
		"3908 bytes from 10.42.0.2", "HICAIN-NC-OK", "HICAIN-RMMOD-OK", clean,
	} {
		if !strings.Contains(c1, want) {
			t.Errorf("guest 1 console lacks %q", want)
		}
	}
	txSum, rxSum := consoleWord(c1, "HICAIN-TXSUM"), consoleWord(c2, "HICAIN-RXSUM")
	if txSum == "" || txSum != rxSum {
		t.Errorf("TCP transfer: guest 1 sent md5 %q, guest 2 received md5 %q", txSum, rxSum)
	}
	if n := strings.Count(c1, "3 packets transmitted, 3 packets received"); n != 4 {
		t.Errorf("guest 1: %d of 4 pings had every reply", n)
	}
	for _, want := range []string{
		"HICAIN-UP 10.42.0.2 carrier=1 mtu=4000", "device fatal, code 2; resetting", "device reset done",
		"HICAIN-RMMOD-OK", "HICAIN-REPROBE carrier=1", "HICAIN-RMMOD2-OK", clean,
	} {
		if !strings.Contains(c2, want) {
			t.Errorf("guest 2 console lacks %q", want)
		}
	}
	for _, g := range []*testutil.QEMU{g1, g2} {
		for _, l := range strings.Split(g.Out.String(), "\n") {
			if strings.Contains(l, "HICAIN-") || strings.Contains(l, "hicain") {
				t.Logf("%s: %s", g.Name, strings.TrimSpace(l))
			}
			for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "INSMOD-FAIL", "UNREACHABLE",
				"MTU-OVER-LIMIT", "MTU-JUMBO-FAIL"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s: %s", g.Name, strings.TrimSpace(l))
				}
			}
		}
	}
	for i, v := range before.VNICs {
		c := v.Counters
		t.Logf("vNIC %d after the first pings: state %s, L2 tx %d rx %d rx-dropped %d, doorbells %d, "+
			"interrupts %d, admin %d (%d errors)", i+1, v.State, c.L2Tx, c.L2Rx, c.L2RxDropped, c.Doorbells,
			c.Interrupts, c.AdminCmds, c.AdminErrors)
		// 3 x 3 echo requests or replies each way, ARP, and the
		// transfer: 3,388,895 bytes (seq 1 500000) in TCP segments of at
		// most 3948 bytes (MTU 4000) one way, at least 859 frames; the
		// other way ACKs, as few as TCP likes.
		frames := min(c.L2Tx, c.L2Rx) >= 9 && max(c.L2Tx, c.L2Rx) >= 859
		if v.State != "live" || !frames || c.AdminCmds == 0 || c.AdminErrors != 0 || c.Fatal != 0 {
			t.Errorf("vNIC %d: state %s, L2 tx %d rx %d, admin %d (%d errors), fatal %d", i+1, v.State, c.L2Tx,
				c.L2Rx, c.AdminCmds, c.AdminErrors, c.Fatal)
		}
	}
	if f := after.VNICs[0].Counters.Fatal; f != 0 {
		t.Errorf("vNIC 1 went fatal %d times", f)
	}
	if f := after.VNICs[1].Counters.Fatal; f != 1 {
		t.Errorf("vNIC 2 went fatal %d times, want 1 (the broken index)", f)
	}
}

// consoleWord returns the word after marker on a console, or "".
func consoleWord(console, marker string) string {
	for _, l := range strings.Split(console, "\n") {
		if i := strings.Index(l, marker+" "); i >= 0 {
			if f := strings.Fields(l[i+len(marker):]); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// breakRxIndex moves the L2 RX producer index in the BAR2 of the QEMU
// process pid (the shared memory fd QEMU holds) 1000 entries ahead, as a
// broken driver would. The driver may be publishing its own index for a
// frame that arrived just before (NAPI stores it, it does not add), so
// the index is checked again a little later and moved once more if the
// driver overwrote it, unless the backend has declared vNIC number vnic
// of srv fatal meanwhile.
func breakRxIndex(t *testing.T, srv *device.Server, vnic, pid int, mac [6]byte) {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); !strings.Contains(l, "hicain-bar2") {
			continue
		}
		f, err := os.OpenFile(fd, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b, err := unix.Mmap(int(f.Fd()), 0, device.BAR2Min, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(b)
		h := (*device.DevHdr)(unsafe.Pointer(&b[0]))
		if atomic.LoadUint32(&h.Magic) != device.Magic || h.MAC != mac {
			continue
		}
		fatal := func() uint64 { return srv.Status().VNICs[vnic].Counters.Fatal }
		before := fatal()
		for range 20 {
			atomic.AddUint32(&h.L2RxProd, 1000)
			time.Sleep(300 * time.Millisecond)
			prod, cons := atomic.LoadUint32(&h.L2RxProd), atomic.LoadUint32(&h.L2RxCons)
			if prod-cons > device.L2RxEntries || fatal() != before {
				return
			}
			t.Logf("the driver rewrote the L2 RX producer index (%d, consumer %d); moving it again", prod, cons)
		}
		t.Fatal("the driver keeps rewriting the L2 RX producer index")
	}
	t.Fatalf("no HiNIC BAR2 among the fds of QEMU %d", pid)
}

// startTwoVNICs starts a switch and a device backend with two q35 vNICs
// of 256 MiB (MACs 02:48:4e:00:00:01 and :02, no IP addresses) on its
// ports 1 and 2, in a short temporary directory (socket paths stay within
// sun_path) named after prefix. Cleanups run last in, first out: the
// guests a test starts later stop before the backend, the backend before
// the switch.
func startTwoVNICs(t *testing.T, prefix string) (*device.Server, []device.VNICConfig, string) {
	return startVNICPair(t, prefix, false, 1)
}

// startVNICPair is startTwoVNICs, on native InfiniBand when ib is set:
// the switch ports and the vNICs are link ib (MACs 02:48:4e:00:01:0N,
// node GUIDs 0x02484efffe0010N0), and the ports wait in Init for a
// subnet manager. With two switches, vNIC N is on port 1 of switch hsN
// (node GUID 0x02484efffe0020N0), and port 2 of each joins the two.
func startVNICPair(t *testing.T, prefix string, ib bool, switches int) (*device.Server, []device.VNICConfig, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 2}
	link := ""
	if ib {
		link = fabric.LinkIB
	}
	switch switches {
	case 1:
		if ib {
			fc.Switches = []fabric.SwitchConfig{{Name: fabric.DefaultSwitchName, Ports: 2,
				Port: []fabric.PortConfig{{Num: 1, Link: link}, {Num: 2, Link: link}}}}
		}
	case 2:
		for i := 1; i <= 2; i++ {
			fc.Switches = append(fc.Switches, fabric.SwitchConfig{Name: fmt.Sprintf("hs%d", i), Ports: 2,
				NodeGUID: switchGUID(i), Port: []fabric.PortConfig{{Num: 1, Link: link}, {Num: 2, Link: link}}})
		}
		fc.Links = []fabric.LinkConfig{{A: "hs1:2", B: "hs2:2"}}
	default:
		t.Fatalf("startVNICPair: %d switches, want 1 or 2", switches)
	}
	fab, err := fabric.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	var cfgs []device.VNICConfig
	for i := 1; i <= 2; i++ {
		port := fab.Switches()[0].SocketPath(i)
		if switches == 2 {
			port = fab.Switches()[i-1].SocketPath(1)
		}
		c := device.VNICConfig{
			Name:       fmt.Sprintf("vm%d/hicain0", i),
			Socket:     filepath.Join(dir, fmt.Sprintf("ivshmem%d.sock", i)),
			RAMPath:    filepath.Join(dir, fmt.Sprintf("vm%d.ram", i)),
			RAMSize:    256 << 20,
			Machine:    device.MachineQ35,
			Vectors:    4,
			FabricPort: port,
			MAC:        [6]byte{0x02, 0x48, 0x4e, 0, 0, byte(i)},
		}
		if ib {
			c.MAC[4] = 1
			c.LinkLayer = "ib"
			c.NodeGUID = 0x0248_4eff_fe00_1000 | uint64(i)<<4
		}
		cfgs = append(cfgs, c)
	}
	srv, err := device.Start(context.Background(), device.Config{VNICs: cfgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, cfgs, dir
}

// switchGUID is the node GUID of switch hsN of startVNICPair.
func switchGUID(n int) uint64 { return 0x0248_4eff_fe00_2000 | uint64(n)<<4 }
