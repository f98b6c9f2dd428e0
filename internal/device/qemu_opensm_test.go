package device_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/testutil"
)

// opensmGuestInit is /init of the guests of TestQEMUOpenSM. Both load
// ib_core, ib_uverbs, ib_umad, hicain_net and hicain_ib (an InfiniBand
// vNIC: no Ethernet netdev) and virtio-net, the out-of-band network
// ibv_*_pingpong exchange their QP numbers and LIDs over (10.43.0.n).
// Guest 1 runs Debian's opensm; both wait until ibstat shows their port
// Active, then print ibstat and ibv_devinfo. ibv_rc_pingpong and
// ibv_ud_pingpong run by LID (no -g), server on guest 1. Guest 1 then
// looks at the subnet with infiniband-diags: ibnetdiscover, smpquery
// (its own port by directed route, which never leaves the host, and
// guest 2's by LID, which the test passes in) and perfquery.
const opensmGuestInit = `#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /var/log /var/cache/opensm
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
n=$(sed -n 's/.*hicain.n=\([0-9]*\).*/\1/p' /proc/cmdline)
for m in $(cat /lib/modules/load-order); do
	insmod /lib/modules/$m || echo HICAIN-INSMOD-FAIL $m
done
insmod /hicain_net.ko || echo HICAIN-INSMOD-FAIL hicain_net
insmod /hicain_ib.ko || echo HICAIN-INSMOD-FAIL hicain_ib
ip link set lo up
ip link set eth0 up && ip addr add 10.43.0.$n/24 dev eth0
port=/sys/class/infiniband/hicain_0/ports/1
echo HICAIN-UP ib=$(ls /sys/class/infiniband | tr '\n' ' ') link_layer=$(cat $port/link_layer) \
	state="$(cat $port/state)" hicain_netdevs=$(ls -d /sys/bus/pci/drivers/hicain_net/*/net 2>/dev/null | wc -l) \
	dev=$(ls /dev/infiniband | tr '\n' ' ')
if [ $n = 1 ]; then
	# The first sweep finds the port in Init; the SM gives LIDs and
	# activates every port, its own through hicain_ib's process_mad.
	# Its options file only makes it flush each log line: the test
	# reads the log while it runs.
	OSM_TMP_DIR=/tmp OSM_CACHE_DIR=/tmp opensm -F /etc/opensm/opensm.conf -f /tmp/opensm.log \
		> /tmp/opensm.out 2>&1 &
fi
i=0
until grep -q ACTIVE $port/state; do
	i=$((i + 1)); [ $i -ge 600 ] && { echo HICAIN-NOT-ACTIVE; break; }
	usleep 200000
done
echo HICAIN-ACTIVE after $((i / 5)) s
echo HICAIN-IBSTAT-BEGIN
ibstat hicain_0
echo HICAIN-IBSTAT-END rc=$?
ibv_devinfo -d hicain_0
echo HICAIN-DEVINFO rc=$?
echo HICAIN-LID $(cat $port/lid)
peer=10.43.0.1
serve() {
	name=$1; shift
	echo HICAIN-BEGIN $name
	timeout 90 "$@" 2>&1
	echo HICAIN-END $name rc=$?
}
connect() {
	name=$1; shift
	echo HICAIN-BEGIN $name
	rc=1 i=0
	while [ $i -lt 30 ]; do
		timeout 90 "$@" $peer 2>&1 && { rc=0; break; }
		i=$((i + 1)); sleep 1
	done
	echo HICAIN-END $name rc=$rc
}
run=connect
[ $n = 1 ] && run=serve
$run rc ibv_rc_pingpong -d hicain_0 -n 100 -c -p 18600
$run ud ibv_ud_pingpong -d hicain_0 -n 100 -s 1024 -p 18601
if [ $n = 1 ]; then
	read -t 120 peerlid
	echo HICAIN-BEGIN diags
	ibnetdiscover 2>&1
	echo HICAIN-NETDISCOVER rc=$?
	smpquery -D nodeinfo 0 2>&1
	echo HICAIN-SMPQUERY-LOCAL rc=$?
	smpquery nodeinfo $peerlid 2>&1
	echo HICAIN-SMPQUERY-PEER rc=$?
	perfquery $peerlid 1 2>&1
	echo HICAIN-PERFQUERY rc=$?
	echo HICAIN-END diags
	i=0
	until grep -q 'SUBNET UP' /tmp/opensm.log; do
		i=$((i + 1)); [ $i -ge 60 ] && break
		sleep 1
	done
	grep -h -m1 'SUBNET UP' /tmp/opensm.log && echo HICAIN-SUBNET-UP
	echo HICAIN-BEGIN opensm
	cat /tmp/opensm.out
	grep -E 'ERR|MASTER|SUBNET' /tmp/opensm.log
	echo HICAIN-END opensm
fi
dmesg | grep -i -E 'hicain|infiniband|ib_mad'
echo HICAIN-DONE
# Guest 2's port serves guest 1's diags until the test lets both go.
read -t 150 line
poweroff -f
`

// opensmBinary is Debian's opensm as scripts/deps.sh unpacks it (the
// package itself would start the service on the host), or one on PATH.
func opensmBinary() (string, bool) {
	root := os.Getenv("HINIC_OPENSM_ROOT")
	if root == "" {
		root = "/var/lib/hinic/opensm"
	}
	if p := filepath.Join(root, "usr/sbin/opensm"); isExecutable(p) {
		return p, true
	}
	p, err := exec.LookPath("opensm")
	return p, err == nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// TestQEMUOpenSM brings a native InfiniBand subnet up with stock OpenSM:
// two TCG guests, each with an InfiniBand vNIC on a port of one HiSwitch
// whose ports are InfiniBand links; guest 1 runs Debian's opensm over
// umad (QP0 through hicain_ib, its own port through process_mad and the
// device's SMA). Both ports must come up Active with LIDs and guest 1's
// LID as SM LID, as ibstat and ibv_devinfo (link layer InfiniBand) show;
// ibv_rc_pingpong and ibv_ud_pingpong must pass between the guests
// addressed by LID; ibnetdiscover must find the switch and both CAs, and
// smpquery and perfquery must be answered.
func TestQEMUOpenSM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	testutil.RequireTool(t, "qemu-system-x86_64", "apt-get install qemu-system-x86", err == nil)
	kernel, release := guestKernel(t)
	busybox := "/bin/busybox"
	_, err = os.Stat(busybox)
	testutil.RequireTool(t, "static busybox", "apt-get install busybox-static", err == nil)
	osm, ok := opensmBinary()
	testutil.RequireTool(t, "opensm", "scripts/deps.sh unpacks it", ok)
	tools := []string{osm}
	for _, b := range []string{"ibstat", "ibnetdiscover", "smpquery", "perfquery"} {
		p, err := exec.LookPath(b)
		testutil.RequireTool(t, b, "apt-get install infiniband-diags", err == nil)
		tools = append(tools, p)
	}
	for _, b := range []string{"ibv_devinfo", "ibv_rc_pingpong", "ibv_ud_pingpong"} {
		p, err := exec.LookPath(b)
		testutil.RequireTool(t, b, "apt-get install ibverbs-utils", err == nil)
		tools = append(tools, p)
	}
	netKo := buildModule(t, release)
	ibKo := filepath.Join(filepath.Dir(netKo), "hicain_ib.ko")
	so, driver := buildProvider(t)

	_, cfgs, dir := startVNICPair(t, "hosm", true)

	w, err := testutil.BusyboxInitramfs(busybox, opensmGuestInit, "proc", "sys", "usr", "usr/bin", "usr/sbin", "sbin")
	if err != nil {
		t.Fatal(err)
	}
	r := &initramfs{w: w, dirs: map[string]bool{"dev": true, "bin": true, "proc": true, "sys": true,
		"usr": true, "usr/bin": true, "usr/sbin": true, "sbin": true}}
	var order []string
	for _, m := range guestModules(t, release, "ib_core", "ib_uverbs", "ib_umad", "virtio_pci", "virtio_net") {
		name := moduleName(m) + ".ko"
		r.add(t, "/lib/modules/"+name, 0o644, readModule(t, filepath.Join("/lib/modules", release, m)))
		order = append(order, name)
	}
	r.add(t, "/etc/opensm/opensm.conf", 0o644, []byte("force_log_flush TRUE\n"))
	r.add(t, "/lib/modules/load-order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	r.addFile(t, "/hicain_net.ko", netKo, 0o644)
	r.addFile(t, "/hicain_ib.ko", ibKo, 0o644)
	for _, p := range tools {
		r.addFile(t, "/usr/sbin/"+filepath.Base(p), p, 0o755)
	}
	r.addFile(t, "/usr/lib/x86_64-linux-gnu/libibverbs/libhicain-rdmav34.so", so, 0o755)
	r.addFile(t, "/etc/libibverbs.d/hicain.driver", driver, 0o644)
	for _, lib := range sharedLibs(t, append([]string{so}, tools...)...) {
		r.addFile(t, lib, lib, 0o755)
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// The guests' out-of-band network: one virtio-net NIC each, joined
	// by a pair of datagram sockets.
	sock := func(i int) string { return filepath.Join(dir, fmt.Sprintf("oob%d.sock", i)) }
	oob := func(i int) []string {
		return []string{"-netdev", fmt.Sprintf("dgram,id=oob,local.type=unix,local.path=%s,remote.type=unix,remote.path=%s",
			sock(i), sock(3-i)), "-device", fmt.Sprintf("virtio-net-pci,netdev=oob,mac=52:54:00:00:43:%02x", i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Second)
	defer cancel()
	start := time.Now()
	g1 := startGuest(t, ctx, "guest 1", qemu, kernel, initrd, cfgs[0], "hicain.n=1", oob(1)...)
	g2 := startGuest(t, ctx, "guest 2", qemu, kernel, initrd, cfgs[1], "hicain.n=2", oob(2)...)
	g1.wait(ctx, t, "HICAIN-ACTIVE")
	g2.wait(ctx, t, "HICAIN-ACTIVE")
	t.Logf("both ports active after %v", time.Since(start).Round(time.Second))
	g2.wait(ctx, t, "HICAIN-LID")
	lid2 := consoleWord(g2.out.String(), "HICAIN-LID")
	g2.wait(ctx, t, "HICAIN-DONE")
	fmt.Fprintln(g1.stdin, lid2)
	g1.wait(ctx, t, "HICAIN-DONE")
	t.Logf("both guests done after %v", time.Since(start).Round(time.Second))
	fmt.Fprintln(g1.stdin, "bye")
	fmt.Fprintln(g2.stdin, "bye")

	c1, c2 := g1.out.String(), g2.out.String()
	for _, g := range []*qemuGuest{g1, g2} {
		for _, l := range strings.Split(g.out.String(), "\n") {
			for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "INSMOD-FAIL", "HICAIN-NOT-ACTIVE",
				"Couldn't open port", "Couldn't create ib_mad", "libibverbs: Warning"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s: %s", g.name, strings.TrimSpace(l))
				}
			}
		}
	}
	// sysfs has the LIDs in hex, the tools print them in decimal.
	var lids [2]string
	for i, s := range []string{consoleWord(c1, "HICAIN-LID"), lid2} {
		v, err := strconv.ParseUint(s, 0, 16)
		if err != nil || v == 0 || v >= 0xC000 {
			t.Fatalf("guest %d's LID %q: %v", i+1, s, err)
		}
		lids[i] = strconv.FormatUint(v, 10)
	}
	lid1 := lids[0]
	if lids[0] == lids[1] {
		t.Errorf("both guests have LID %s", lid1)
	}
	for _, c := range []struct{ name, con, lid string }{{"guest 1", c1, lids[0]}, {"guest 2", c2, lids[1]}} {
		ibstat := section(c.con, "HICAIN-IBSTAT-BEGIN", "HICAIN-IBSTAT-END")
		devinfo := section(c.con, "HICAIN-IBSTAT-END", "HICAIN-DEVINFO")
		t.Logf("%s ibstat:\n%s", c.name, ibstat)
		t.Logf("%s ibv_devinfo:\n%s", c.name, devinfo)
		for _, want := range []string{"HICAIN-UP ib=hicain_0 link_layer=InfiniBand", "hicain_netdevs=0",
			"HICAIN-IBSTAT-END rc=0", "HICAIN-DEVINFO rc=0", "HICAIN-END rc rc=0", "HICAIN-END ud rc=0"} {
			if !strings.Contains(c.con, want) {
				t.Errorf("%s console lacks %q", c.name, want)
			}
		}
		for _, re := range []string{`State: Active`, `Physical state: LinkUp`, `Base lid: ` + c.lid + `\b`,
			`SM lid: ` + lid1 + `\b`, `Link layer: InfiniBand`} {
			if !regexp.MustCompile(re).MatchString(ibstat) {
				t.Errorf("%s: ibstat lacks %q", c.name, re)
			}
		}
		for _, re := range []string{`link_layer:\s+InfiniBand`, `state:\s+PORT_ACTIVE \(4\)`,
			`port_lid:\s+` + c.lid + `\b`, `sm_lid:\s+` + lid1 + `\b`} {
			if !regexp.MustCompile(re).MatchString(devinfo) {
				t.Errorf("%s: ibv_devinfo lacks %q", c.name, re)
			}
		}
		rc := section(c.con, "HICAIN-BEGIN rc", "HICAIN-END rc")
		t.Logf("%s ibv_rc_pingpong:\n%s", c.name, rc)
		// 100 x 4096 bytes each way; the peer is addressed by LID, with
		// no GID in the exchange.
		if !regexp.MustCompile(`(?m)^819200 bytes in [0-9.]+ seconds`).MatchString(rc) ||
			!regexp.MustCompile(`remote address: LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]+, PSN 0x[0-9a-f]+, GID ::`).MatchString(rc) {
			t.Errorf("%s: ibv_rc_pingpong did not move 100 x 4096 bytes each way by LID", c.name)
		}
		if ud := section(c.con, "HICAIN-BEGIN ud", "HICAIN-END ud"); !regexp.MustCompile(`(?m)^204800 bytes in`).MatchString(ud) {
			t.Errorf("%s: ibv_ud_pingpong:\n%s", c.name, ud)
		}
	}
	t.Logf("guest 1 OpenSM:\n%s", section(c1, "HICAIN-BEGIN opensm", "HICAIN-END opensm"))
	diags := section(c1, "HICAIN-BEGIN diags", "HICAIN-END diags")
	t.Logf("guest 1 infiniband-diags:\n%s", diags)
	for _, want := range []string{"HICAIN-NETDISCOVER rc=0", "HICAIN-SMPQUERY-LOCAL rc=0", "HICAIN-SMPQUERY-PEER rc=0",
		"HICAIN-PERFQUERY rc=0", "HICAIN-SUBNET-UP"} {
		if !strings.Contains(c1, want) {
			t.Errorf("guest 1 console lacks %q", want)
		}
	}
	for _, re := range []string{`(?m)^Switch\s+2 `, `(?m)^Ca\s+1 .*"vm1/hicain0"`, `(?m)^Ca\s+1 .*"vm2/hicain0"`,
		fmt.Sprintf(`Guid:\.+0x%016x`, cfgs[0].NodeGUID), fmt.Sprintf(`Guid:\.+0x%016x`, cfgs[1].NodeGUID),
		`PortXmitData:\.+[1-9]`} {
		if !regexp.MustCompile(re).MatchString(diags) {
			t.Errorf("infiniband-diags output lacks %q", re)
		}
	}
}
