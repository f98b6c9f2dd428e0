package deploy

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
)

// Files of the HiNIC device backend: in the run directory, and per hicain
// guest in its directory.
const (
	FileDeviceLog = "device.log"
	FileDevicePID = "device.pid"
	FileDeviceCtl = "device.sock" // the backend's control socket
	FileIvshmem   = "ivshmem.sock"
	FileQMP       = "qmp.sock" // the guest's QEMU monitor (QMP)
	FileGuestRAM  = "ram"      // the guest RAM file QEMU and the backend share
	hicainDriver  = "hicain_net"
	hicainIB      = "hicain_ib"
	hicainVectors = 8 // ivshmem vectors: control, L2 and CQ vectors
	// hicainMaxMTU and hicainMinMTU bound the rack's mtu with hicain
	// guests: the netdev takes up to the device header's max_mtu (a
	// 9000-byte jumbo frame, device.MaxNetdevMTU), which leaves room for
	// the largest RoCE MTU, 4096.
	hicainMaxMTU = device.MaxNetdevMTU
	hicainMinMTU = 256
	// ibMaxMTU is the largest IB MTU, the most a vNIC's path MTU can be.
	ibMaxMTU = 4096
	// roceHeaders is what ib_core's iboe_get_mtu takes off a netdev MTU
	// for the RoCE MTU of hicain_ib (GRH 40, UDP 8, BTH 12, XRCETH 4,
	// AtomicETH 28, ICRC 4); rxeHeaders is rdma_rxe's
	// RXE_MAX_HDR_LENGTH, which it takes off instead.
	roceHeaders = 96
	rxeHeaders  = 80
	// defaultNetdevMTU is the MTU a guest netdev keeps when the rack sets
	// none.
	defaultNetdevMTU = 1500
)

// QEMUMachine is the machine type of every guest: QEMU's default x86
// machine, named because the device backend must know it to translate
// guest-physical addresses into offsets of the RAM file.
const QEMUMachine = device.MachinePC

// deviceProc is the rack's `hinic device serve --control RUN/device.sock`,
// run by exe (State.DeviceExe).
func deviceProc(r *Rack, exe string) proc {
	return hinicProc(exe, "device", "serve", "--control", DeviceControl(r))
}

// joined reports whether the rack's fabric runs inside its device
// backend (DaemonsJoined with hicain guests). A state written before
// the key existed has no Daemons: such a rack runs split.
func (r *Rack) joined() bool {
	return r.Daemons == DaemonsJoined && len(r.hicainGuests()) > 0
}

// hicainGuests returns the guests of the rack with a HiNIC vNIC.
func (r *Rack) hicainGuests() []Guest {
	return r.guestsWhere(func(g Guest) bool { return g.NIC == NICHicain })
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

// DeviceMTU is the path MTU limit of the rack's RoCE vNICs: the RoCE MTU
// that hicain_ib derives from the netdev MTU (the largest IB MTU, 256 to
// 4096 bytes, that fits it after the RoCEv2 headers, as iboe_get_mtu
// does), so that the engine's limit is the active MTU the guest shows:
// 1500 (the netdev's default, when the rack sets no mtu) gives 1024, 4096
// gives 2048 and 4192 to 9000 give 4096.
func DeviceMTU(r *Rack) int {
	return max(ibMTUUnder(cmp.Or(r.MTU, defaultNetdevMTU)-roceHeaders), hicainMinMTU)
}

// ibMTUUnder is the largest IB MTU (256, 512, ..., 4096) of at most n
// bytes, or 0 when n is under 256.
func ibMTUUnder(n int) int {
	if n < 256 {
		return 0
	}
	m := 256
	for m*2 <= min(n, ibMaxMTU) {
		m *= 2
	}
	return m
}

// ActiveMTU is the RoCE active MTU guest g of the rack should show
// (ibv_devinfo's active_mtu): for rxe what rdma_rxe derives from the
// netdev MTU, for a hicain RoCE vNIC DeviceMTU. An InfiniBand port's MTU
// is the subnet manager's to set: 0, no expectation.
func ActiveMTU(r *Rack, g Guest) int {
	switch {
	case g.Link == LinkIB:
		return 0
	case g.NIC == NICRxe:
		return ibMTUUnder(cmp.Or(r.MTU, defaultNetdevMTU) - rxeHeaders)
	default:
		return DeviceMTU(r)
	}
}

// guestMTU is the path MTU limit of guest g's vNIC: DeviceMTU, or for
// an InfiniBand vNIC, which no netdev bounds, 4096 unless the rack sets
// an mtu (OpenSM's default IPoIB broadcast group, MTU 2048, admits only
// ports that can carry it).
func guestMTU(r *Rack, g Guest) int {
	if g.Link == LinkIB {
		if r.MTU == 0 {
			return ibMaxMTU
		}
		return max(ibMTUUnder(r.MTU), hicainMinMTU)
	}
	return DeviceMTU(r)
}

// DeviceArgs is the `hinic device serve` command line (after the binary)
// of the rack: one --vnic per hicain guest, on the guest's fabric port.
func DeviceArgs(r *Rack) []string {
	args := []string{"device", "serve", "--control", DeviceControl(r)}
	if r.joined() {
		args = append(args, "--config", filepath.Join(r.RunDir, FileFabricConf), "--fabric")
	}
	if _, m, _ := MetricsAddrs(r); m != "" {
		args = append(args, "--metrics", m)
	}
	for _, g := range r.hicainGuests() {
		opts := []string{
			"name=" + g.Name + "/hicain0",
			"socket=" + IvshmemSocket(r, g),
			"ram=" + GuestRAM(r, g),
			fmt.Sprintf("ram-size=%dM", g.Memory),
			"machine=" + string(QEMUMachine),
			"port=" + PortSocket(r, g.Switch, g.Port),
			"mac=" + g.MAC,
			"ip=" + g.IP,
			// Port security: the guest uses its data IP (and the
			// RoCEv2 GID ::ffff:IP, the same pin) and its MAC's
			// link-local address, which the backend always allows.
			"allow-ip=" + g.IP,
			"link=" + cmp.Or(g.Link, LinkEth),
			fmt.Sprintf("vectors=%d", hicainVectors),
			fmt.Sprintf("mtu=%d", guestMTU(r, g)),
		}
		if g.TrustPause {
			opts = append(opts, "trust-pause=true")
		}
		args = append(args, "--vnic", strings.Join(opts, ","))
	}
	return args
}

// HicainQdevID is the qdev id of a hicain guest's ivshmem function as
// QEMU starts, and hicainChardev that of its ivshmem server's chardev:
// the names `deploy restart device` finds them by, through QMP. Each
// restart adds a function with the next names (hicainQdevID(n)).
const (
	HicainQdevID  = "hicain0"
	hicainChardev = "ivs0"
)

// hicainQdevID and hicainChardevID are the names of the n-th function
// deploy gave a running guest (0: QEMUArgs' own).
func hicainQdevID(n int) string    { return fmt.Sprintf("hicain%d", n) }
func hicainChardevID(n int) string { return fmt.Sprintf("ivs%d", n) }

// QMPSocket is the UNIX socket of the QMP monitor of the guest whose
// directory is dir.
func QMPSocket(dir string) string { return filepath.Join(dir, FileQMP) }

// checkPaths refuses run directories whose sockets would not fit a UNIX
// socket address, and, with hicain guests, commas (the separator of
// --vnic and of QEMU's option lists).
func checkPaths(r *Rack) error {
	const sunPath = 107 // sizeof(sun_path) minus the terminating NUL
	socks := []string{filepath.Join(r.RunDir, DirFabric, fabric.ControlSocketName)}
	for _, g := range r.Guests {
		socks = append(socks, PortSocket(r, g.Switch, g.Port))
		if g.NIC == NICHicain {
			socks = append(socks, IvshmemSocket(r, g))
		} else {
			socks = append(socks, StreamSocket(r, g))
		}
		for _, id := range g.GPUs.IDs {
			socks = append(socks, GPUSocket(r, g, id))
		}
	}
	if len(r.hicainGuests()) > 0 {
		socks = append(socks, DeviceControl(r))
	}
	if len(r.gpuGuests()) > 0 {
		socks = append(socks, GPUControl(r))
	}
	if len(r.ramGuests()) > 0 && strings.Contains(r.RunDir, ",") {
		return fmt.Errorf("deploy: run dir %s: a comma cannot be passed to a device backend or QEMU; choose another --run-dir", r.RunDir)
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
	if alive(st.DevicePID, deviceProc(r, st.DeviceExe)) {
		why := deviceReusable(ctx, st.DevicePID, args, DeviceControl(r))
		if why == "" {
			p("device: already running (pid %d)", st.DevicePID)
			if r.joined() {
				st.FabricPID, st.FabricExe = st.DevicePID, st.DeviceExe
			}
			return false, nil
		}
		p("device: restarting the backend (pid %d): %s", st.DevicePID, why)
		if err := stop(st.DevicePID, deviceProc(r, st.DeviceExe), "device", p); err != nil {
			return false, err
		}
	}
	for _, g := range r.hicainGuests() {
		if err := ensureGuestDir(GuestDir(r, g.Name)); err != nil {
			return false, err
		}
	}
	// The control socket listens once every vNIC has its RAM file, its
	// ivshmem socket and its fabric port.
	pid, exe, err := r.spawn(ctx, hinic, daemon{what: "device backend", unit: UnitDevice, args: args, logPath: logPath,
		pidPath: filepath.Join(r.RunDir, FileDevicePID), ready: func() bool {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := device.QueryStatus(qctx, DeviceControl(r))
			return err == nil
		}})
	if pid != 0 {
		st.DevicePID, st.DeviceExe = pid, exe
	}
	if err != nil {
		return pid != 0, err
	}
	if r.joined() {
		st.FabricPID, st.FabricExe = st.DevicePID, st.DeviceExe
	}
	var mtus []string
	for _, g := range r.hicainGuests() {
		mtus = append(mtus, fmt.Sprintf("%s %s MTU %d", g.Name, g.Link, guestMTU(r, g)))
	}
	p("device: serving %d vNIC(s): %s (pid %d, log %s)", len(mtus), strings.Join(mtus, ", "), st.DevicePID, logPath)
	return true, nil
}

// deviceReusable returns why the running backend pid cannot serve the
// rack, or "" when it can: same command line, control socket answering,
// every fabric link up (the backend redials a switch that went away, so
// a link still down is a fabric that is not back, or not the rack's).
func deviceReusable(ctx context.Context, pid int, args []string, control string) string {
	if why := sameCmdline(pid, args, "the rack's vNICs changed"); why != "" {
		return why
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
	if err := loadHicain(ctx, c); err != nil {
		return "", "", err
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

// loadHicain loads hicain_net in the guest and checks that libhicain is
// installed: what both link layers start with.
func loadHicain(ctx context.Context, c *Client) error {
	if out, err := c.Run(ctx, "modprobe "+hicainDriver+" || { echo \"(guest kernel $(uname -r))\"; exit 1; }"); err != nil {
		return fmt.Errorf("modprobe %s failed: %s\n%s", hicainDriver, strings.TrimSpace(out), missingHicain)
	}
	if _, err := c.Run(ctx, "test -e /etc/libibverbs.d/hicain.driver"); err != nil {
		return fmt.Errorf("the libibverbs provider libhicain is not installed (no /etc/libibverbs.d/hicain.driver)\n%s",
			missingHicain)
	}
	return nil
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

// IPoIB is the kernel module that gives an InfiniBand port its IP
// netdev; ARPHRDInfiniBand is that netdev's type in sysfs.
const (
	ipoibModule      = "ib_ipoib"
	arphrdInfiniBand = "32"
	// ibActiveTimeout bounds the wait for the subnet manager to bring
	// a port up: its first sweep under TCG takes seconds, and the guest
	// that runs it may still be booting.
	ibActiveTimeout = 180 * time.Second
)

// setupHicainIB brings up a hicain guest whose vNIC is InfiniBand:
// hicain_net (no Ethernet netdev for such a function), hicain_ib, ib_umad
// (umad0 and issm0 for OpenSM and infiniband-diags), ib_ipoib and
// rdma_ucm; starts OpenSM on its port when the rack chose this guest, and
// makes sure no other guest runs one; waits until the subnet manager has
// made the port ACTIVE, then gives the IPoIB netdev the guest's IP. It
// returns the IPoIB netdev and the RDMA device.
func setupHicainIB(ctx context.Context, c *Client, r *Rack, g Guest, p Progress) (nic, dev string, err error) {
	if err := loadHicain(ctx, c); err != nil {
		return "", "", err
	}
	if out, err := c.Run(ctx, "modprobe -a "+hicainIB+" ib_umad "+ipoibModule+" rdma_ucm"); err != nil {
		return "", "", fmt.Errorf("modprobe %s ib_umad %s rdma_ucm: %w: %s", hicainIB, ipoibModule, err, strings.TrimSpace(out))
	}
	out, err := c.Run(ctx, "udevadm settle -t 10 >/dev/null 2>&1; ls /sys/bus/pci/drivers/"+hicainDriver+"/*/infiniband/")
	devs := strings.Fields(out)
	if err != nil || len(devs) != 1 {
		return "", "", fmt.Errorf("want one RDMA device of %s in the guest, found %q (is the ivshmem device there? lspci -nn | grep 1af4:1110)",
			hicainDriver, strings.TrimSpace(out))
	}
	dev = devs[0]
	port := "/sys/class/infiniband/" + dev + "/ports/1"
	if out, err := c.Run(ctx, "cat "+port+"/link_layer"); err != nil || strings.TrimSpace(out) != "InfiniBand" {
		return "", dev, fmt.Errorf("%s: link layer %q, want InfiniBand (the device backend serves the vNIC with link=%s)",
			dev, strings.TrimSpace(out), g.Link)
	}
	if err := ensureOpenSM(ctx, c, r, g, dev, p); err != nil {
		return "", dev, err
	}
	// The guest that runs OpenSM waits until it is the master its own
	// port names: an SM that the image started at boot elsewhere may have
	// configured the subnet first, and ours takes over once deploy has
	// stopped that one.
	sm := r.OpenSM == g.Name
	var last string
	for start := time.Now(); ; {
		out, err := c.Run(ctx, "cat "+port+"/state "+port+"/lid "+port+"/sm_lid")
		f := strings.Fields(out)
		if err == nil && strings.Contains(out, "ACTIVE") && len(f) >= 2 && (!sm || f[len(f)-2] == f[len(f)-1]) {
			p("%s: %s port 1 ACTIVE, LID %s, SM LID %s", g.Name, dev, f[len(f)-2], f[len(f)-1])
			break
		}
		last = strings.Join(strings.Fields(out), " ")
		if time.Since(start) > ibActiveTimeout {
			if sm {
				return "", dev, fmt.Errorf("%s port 1 is not ACTIVE with this guest's OpenSM as its SM after %v (state, LID, SM LID: %s); %s",
					dev, ibActiveTimeout, last, smHint(r))
			}
			return "", dev, fmt.Errorf("%s port 1 is not ACTIVE after %v (%s): no subnet manager configured it; %s",
				dev, ibActiveTimeout, last, smHint(r))
		}
		select {
		case <-ctx.Done():
			return "", dev, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// The IPoIB netdev of the device, whatever udev named it (ib0,
	// ibp0s4).
	out, err = c.Run(ctx, `dev=$(readlink -f /sys/class/infiniband/`+dev+`/device); for d in /sys/class/net/*; do
	[ "$(cat $d/type)" = `+arphrdInfiniBand+` ] && [ "$(readlink -f $d/device)" = "$dev" ] && basename $d; done; true`)
	nics := strings.Fields(out)
	if err != nil || len(nics) != 1 {
		return "", dev, fmt.Errorf("want one IPoIB netdev of %s, found %q (%s loaded?)", dev, strings.TrimSpace(out), ipoibModule)
	}
	nic = nics[0]
	script := fmt.Sprintf("set -e\nip addr replace %s/%d dev %s\nip link set dev %s up\n", g.IP, r.PrefixLen(), nic, nic)
	if out, err := c.Run(ctx, script); err != nil {
		return nic, dev, fmt.Errorf("IPoIB: %w\n%s", err, lastLines(out, 10))
	}
	// The carrier comes once ib_ipoib has joined the partition's
	// broadcast group through the SA.
	for i := 0; ; i++ {
		out, err := c.Run(ctx, "cat /sys/class/net/"+nic+"/carrier")
		if err == nil && strings.TrimSpace(out) == "1" {
			return nic, dev, nil
		}
		if i == 60 {
			return nic, dev, fmt.Errorf("IPoIB %s has no carrier after 60 s: it did not join the broadcast group (the SA of the subnet manager answers the join; %s)",
				nic, smHint(r))
		}
		time.Sleep(time.Second)
	}
}

// smHint says where the rack's subnet manager runs, for errors.
func smHint(r *Rack) string {
	if r.OpenSM == OpenSMNone {
		return "the rack starts none (opensm: none): is one running on the subnet?"
	}
	return fmt.Sprintf("OpenSM runs in guest %s (journalctl -u 'opensm@*' and /var/log/opensm.*.log there)", r.OpenSM)
}

// ensureOpenSM runs Debian's OpenSM service on the port of dev when the
// rack chose guest g for it, and stops it otherwise: an image with the
// opensm package starts one on every InfiniBand port at boot (PORTS=ALL
// in /etc/default/opensm), and a rack wants one master it knows.
func ensureOpenSM(ctx context.Context, c *Client, r *Rack, g Guest, dev string, p Progress) error {
	if r.OpenSM != g.Name {
		_, err := c.Run(ctx, `if [ -e /etc/default/opensm ]; then sed -i 's/^PORTS=.*/PORTS=NONE/' /etc/default/opensm; fi
systemctl stop opensm.service 'opensm@*.service' 2>/dev/null; true`)
		return err
	}
	out, err := c.Run(ctx, fmt.Sprintf(`set -e
test -x /usr/sbin/opensm || { echo "no /usr/sbin/opensm: the image lacks Debian's opensm package"; exit 1; }
guid=$(cat /sys/class/infiniband/%[1]s/ports/1/gids/0 | awk -F: '{printf "0x%%s%%s%%s%%s", $5, $6, $7, $8}')
sed -i "s/^PORTS=.*/PORTS=$guid/" /etc/default/opensm
systemctl reset-failed 'opensm@*.service' 2>/dev/null || true
systemctl restart opensm.service
systemctl start opensm@$guid.service
sleep 1
systemctl is-active opensm@$guid.service
echo $guid`, dev))
	if err != nil {
		return fmt.Errorf("starting OpenSM: %w\n%s", err, lastLines(out, 10))
	}
	f := strings.Fields(out)
	p("%s: OpenSM runs on port GUID %s (opensm@%s.service, log /var/log/opensm.%s.log)", g.Name, f[len(f)-1],
		f[len(f)-1], f[len(f)-1])
	return nil
}
