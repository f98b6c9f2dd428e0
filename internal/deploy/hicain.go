package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/device"
)

// Files of the HiNIC device backend: in the run directory, and per hicain
// guest in its directory.
const (
	FileDeviceLog = "device.log"
	FileDevicePID = "device.pid"
	FileDeviceCtl = "device.sock" // the backend's control socket
	FileIvshmem   = "ivshmem.sock"
	FileGuestRAM  = "ram" // the guest RAM file QEMU and the backend share
	hicainDriver  = "hicain_net"
	hicainIB      = "hicain_ib"
	hicainVectors = 8 // ivshmem vectors: control, L2 and CQ vectors
	hicainMaxMTU  = 4096
	hicainMinMTU  = 256
)

// QEMUMachine is the machine type of every guest: QEMU's default x86
// machine, named because the device backend must know it to translate
// guest-physical addresses into offsets of the RAM file.
const QEMUMachine = device.MachinePC

// deviceCmd is what the backend's /proc/PID/cmdline contains.
const deviceCmd = "\x00device\x00serve\x00"

// hicainGuests returns the guests of the rack with a HiNIC vNIC.
func (r *Rack) hicainGuests() []Guest {
	var gs []Guest
	for _, g := range r.Guests {
		if g.NIC == NICHicain {
			gs = append(gs, g)
		}
	}
	return gs
}

// GuestDir is the directory of guest name in the run directory.
func GuestDir(r *Rack, name string) string { return filepath.Join(r.RunDir, name) }

// IvshmemSocket is the ivshmem socket of a hicain guest: the backend
// listens, QEMU connects.
func IvshmemSocket(r *Rack, g Guest) string {
	return filepath.Join(GuestDir(r, g.Name), FileIvshmem)
}

// GuestRAM is the RAM file of a hicain guest (QEMU's memory-backend-file,
// mapped shared by the backend so that it can DMA into the guest).
func GuestRAM(r *Rack, g Guest) string { return filepath.Join(GuestDir(r, g.Name), FileGuestRAM) }

// DeviceControl is the control socket of the rack's device backend.
func DeviceControl(r *Rack) string { return filepath.Join(r.RunDir, FileDeviceCtl) }

// DeviceMTU is the path MTU limit of the rack's vNICs: the largest IB MTU
// (256, 512, ..., 4096 bytes) that fits the rack's mtu, or 1024 when the
// rack keeps the netdev's default of 1500, the RoCE MTU that a 1500-byte
// netdev allows (and what rxe gives on the same rack).
func DeviceMTU(r *Rack) int {
	if r.MTU == 0 {
		return device.DefaultMTU
	}
	m := hicainMinMTU
	for m*2 <= min(r.MTU, hicainMaxMTU) {
		m *= 2
	}
	return m
}

// DeviceArgs is the `hinic device serve` command line (after the binary)
// of the rack: one --vnic per hicain guest, on the guest's fabric port.
func DeviceArgs(r *Rack) []string {
	args := []string{"device", "serve", "--control", DeviceControl(r)}
	for _, g := range r.hicainGuests() {
		args = append(args, "--vnic", strings.Join([]string{
			"name=" + g.Name + "/hicain0",
			"socket=" + IvshmemSocket(r, g),
			"ram=" + GuestRAM(r, g),
			fmt.Sprintf("ram-size=%dM", g.Memory),
			"machine=" + string(QEMUMachine),
			"port=" + PortSocket(r, g.Switch, g.Port),
			"mac=" + g.MAC,
			"ip=" + g.IP,
			"link=eth",
			fmt.Sprintf("vectors=%d", hicainVectors),
			fmt.Sprintf("mtu=%d", DeviceMTU(r)),
		}, ","))
	}
	return args
}

// hicainQEMUArgs is the part of a hicain guest's QEMU command line that
// replaces the virtio data NIC: guest RAM in a shared file and the
// ivshmem-doorbell function the backend serves.
func hicainQEMUArgs(r *Rack, g Guest) []string {
	return []string{
		"-machine", string(QEMUMachine) + ",memory-backend=ram0",
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on", g.Memory, GuestRAM(r, g)),
		"-chardev", "socket,path=" + IvshmemSocket(r, g) + ",id=ivs0",
		"-device", fmt.Sprintf("ivshmem-doorbell,chardev=ivs0,vectors=%d", hicainVectors),
	}
}

// checkPaths refuses run directories whose sockets would not fit a UNIX
// socket address, and, with hicain guests, commas (the separator of
// --vnic and of QEMU's option lists).
func checkPaths(r *Rack) error {
	const sunPath = 107 // sizeof(sun_path) minus the terminating NUL
	socks := []string{filepath.Join(r.RunDir, DirFabric, "control.sock")}
	for _, g := range r.Guests {
		socks = append(socks, PortSocket(r, g.Switch, g.Port))
		if g.NIC == NICHicain {
			socks = append(socks, IvshmemSocket(r, g))
		}
	}
	if len(r.hicainGuests()) > 0 {
		socks = append(socks, DeviceControl(r))
		if strings.Contains(r.RunDir, ",") {
			return fmt.Errorf("deploy: run dir %s: a comma cannot be passed to the device backend or QEMU; choose another --run-dir", r.RunDir)
		}
	}
	for _, s := range socks {
		if len(s) > sunPath {
			return fmt.Errorf("deploy: socket %s is %d bytes, more than a UNIX socket path holds (%d); choose a shorter --run-dir", s, len(s), sunPath)
		}
	}
	return nil
}

// startDevice starts the rack's device backend, or keeps the one running
// if it serves exactly these vNICs with their fabric links up. It reports
// whether it started a new backend: the hicain guests then need a new
// QEMU, since a QEMU reads the ivshmem setup only at start-up.
func startDevice(ctx context.Context, st *State, hinic string, p Progress) (bool, error) {
	r := &st.Rack
	args := DeviceArgs(r)
	logPath := filepath.Join(r.RunDir, FileDeviceLog)
	if alive(st.DevicePID, deviceCmd) {
		why := deviceReusable(ctx, st.DevicePID, args, DeviceControl(r))
		if why == "" {
			p("device: already running (pid %d)", st.DevicePID)
			return false, nil
		}
		p("device: restarting the backend (pid %d): %s", st.DevicePID, why)
		if err := stop(st.DevicePID, deviceCmd, "device", p); err != nil {
			return false, err
		}
	}
	if hinic == "" {
		var err error
		if hinic, err = os.Executable(); err != nil {
			return false, err
		}
	}
	for _, g := range r.hicainGuests() {
		if err := os.MkdirAll(GuestDir(r, g.Name), 0o755); err != nil {
			return false, err
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ hinic %s\n", strings.Join(args, " "))
	cmd := exec.Command(hinic, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("starting the device backend: %w", err)
	}
	st.DevicePID = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	_ = os.WriteFile(filepath.Join(r.RunDir, FileDevicePID), []byte(strconv.Itoa(st.DevicePID)+"\n"), 0o644)
	// The control socket listens once every vNIC has its RAM file, its
	// ivshmem socket and its fabric port.
	deadline := time.Now().Add(15 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := device.QueryStatus(qctx, DeviceControl(r))
		cancel()
		if err == nil {
			break
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return true, fmt.Errorf("the device backend exited: %v: %s (see %s)", err, lastLines(string(b), 3), logPath)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return true, fmt.Errorf("the device backend did not open its control socket in 15 s (see %s)", logPath)
		}
	}
	p("device: serving %d vNIC(s), MTU %d (pid %d, log %s)", len(r.hicainGuests()), DeviceMTU(r), st.DevicePID, logPath)
	return true, nil
}

// deviceReusable returns why the running backend pid cannot serve the
// rack, or "" when it can: same command line, control socket answering,
// every fabric link up (the backend does not redial a switch that went
// away).
func deviceReusable(ctx context.Context, pid int, args []string, control string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return err.Error()
	}
	if got := bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}); len(got) < 1 ||
		string(bytes.Join(got[1:], []byte{0})) != strings.Join(args, "\x00") {
		return "the rack's vNICs changed"
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := device.QueryStatus(qctx, control)
	if err != nil {
		return err.Error()
	}
	for _, v := range ds.VNICs {
		if !v.LinkUp {
			return fmt.Sprintf("vNIC %s lost its fabric port", v.Name)
		}
	}
	return ""
}

// setupHicain loads the HiNIC drivers in the guest, configures the
// netdev of hicain_net and returns it with its RDMA device. hicain_ib may
// already be loaded (the packages' modules-load.d loads both at boot):
// the driver passes every address change of the netdev on to the device
// (SET_ADDR), so the order does not matter. The RDMA device is found
// under the netdev's PCI function, whatever udev named it (Debian's
// rdma-core renames RDMA devices after their slot, e.g. rocep0s4;
// libhicain matches them by their driver).
func setupHicain(ctx context.Context, c *Client, r *Rack, g Guest) (nic, dev string, err error) {
	if out, err := c.Run(ctx, "modprobe "+hicainDriver+" || { echo \"(guest kernel $(uname -r))\"; exit 1; }"); err != nil {
		return "", "", fmt.Errorf("modprobe %s failed: %s\n%s", hicainDriver, strings.TrimSpace(out), missingHicain)
	}
	if _, err := c.Run(ctx, "test -e /etc/libibverbs.d/hicain.driver"); err != nil {
		return "", "", fmt.Errorf("the libibverbs provider libhicain is not installed (no /etc/libibverbs.d/hicain.driver)\n%s",
			missingHicain)
	}
	// A netdev registered just now may still be renamed by udev.
	out, err := c.Run(ctx, `udevadm settle -t 10 >/dev/null 2>&1; for d in /sys/class/net/*; do
	[ "$(basename "$(readlink -f $d/device/driver)")" = `+hicainDriver+` ] && echo $(basename $d) $(cat $d/address); done; true`)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || len(strings.Fields(lines[0])) != 2 {
		return "", "", fmt.Errorf("want one netdev of %s in the guest, found %q (is the ivshmem device there? lspci -nn | grep 1af4:1110)",
			hicainDriver, strings.TrimSpace(out))
	}
	f := strings.Fields(lines[0])
	nic = f[0]
	if !strings.EqualFold(f[1], g.MAC) {
		return "", "", fmt.Errorf("the %s netdev %s has MAC %s, want %s (the backend's vNIC)", hicainDriver, nic, f[1], g.MAC)
	}
	if out, err := c.Run(ctx, HicainScript(r, g, nic)); err != nil {
		return nic, "", fmt.Errorf("data NIC: %w\n%s", err, lastLines(out, 10))
	}
	// The RDMA device under the netdev's function, once ib_core has the
	// RoCEv2 GID of the data IP (from the netdev's address event).
	gid := "0000:0000:0000:0000:0000:ffff:" + ipv4GIDTail(g.IP)
	var last string
	for i := 0; ; i++ {
		out, err := c.Run(ctx, "udevadm settle -t 5 >/dev/null 2>&1; d=$(ls /sys/class/net/"+nic+"/device/infiniband/); "+
			"echo $d; cat /sys/class/infiniband/$d/ports/1/state /sys/class/infiniband/$d/ports/1/gids/* 2>/dev/null")
		f := strings.Fields(out)
		if err == nil && len(f) >= 3 && strings.Contains(out, "ACTIVE") && strings.Contains(out, gid) {
			return nic, f[0], nil
		}
		last = strings.TrimSpace(out)
		if i == 30 {
			return nic, "", fmt.Errorf("%s: no ACTIVE RDMA device with the GID %s under %s in 30 s: %q", hicainIB, gid, nic, last)
		}
		time.Sleep(time.Second)
	}
}

// ipv4GIDTail is the last 32 bits of the RoCEv2 GID ::ffff:a.b.c.d as
// sysfs prints them ("0a2a:0001" for 10.42.0.1).
func ipv4GIDTail(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return ip
	}
	b := a.As4()
	return fmt.Sprintf("%02x%02x:%02x%02x", b[0], b[1], b[2], b[3])
}

const missingHicain = "The image needs the HiNIC guest modules and provider: build the packages with " +
	"hinic pkg build --kernel <the image's kernel release>, then the image with " +
	"hinic image build --deb <hicain-modules-KVER .deb> --deb <libhicain .deb>, " +
	"or list both .deb files under the guest's debs: in the rack spec."

// HicainScript is the guest shell script that configures the hicain_net
// netdev nic (MTU, address, up) and loads hicain_ib. It is idempotent.
func HicainScript(r *Rack, g Guest, nic string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\n")
	if r.MTU > 0 {
		fmt.Fprintf(&b, "ip link set dev %s mtu %d\n", nic, r.MTU)
	}
	fmt.Fprintf(&b, "ip addr replace %s/%d dev %s\n", g.IP, r.PrefixLen(), nic)
	fmt.Fprintf(&b, "ip link set dev %s up\n", nic)
	fmt.Fprintf(&b, "modprobe %s\n", hicainIB)
	return b.String()
}
