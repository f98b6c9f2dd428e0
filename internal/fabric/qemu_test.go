package fabric_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/testutil"
)

// TestQEMUGuestsPing boots two stock QEMU guests (TCG) with virtio-net
// NICs on -netdev stream ports of one switch; each pings the other
// through it.
func TestQEMUGuestsPing(t *testing.T) {
	g := virtioGuests(t, "hq")
	qemu, kernel, busybox, modDir, mods, dir := g.qemu, g.kernel, g.busybox, g.modDir, g.mods, g.dir
	fab, err := fabric.New(fabric.Config{RunDir: dir, Switches: []fabric.SwitchConfig{{
		Ports: 2, Port: []fabric.PortConfig{{Num: 1, Kind: fabric.KindQEMUStream}, {Num: 2, Kind: fabric.KindQEMUStream}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	sw := fab.Switches()[0]

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	type guest struct {
		n      int
		out    *testutil.LockedBuffer
		cmd    *exec.Cmd
		passed chan struct{}
	}
	var guests []*guest
	for n := 1; n <= 2; n++ {
		initrd := filepath.Join(t.TempDir(), "initrd.cpio")
		if err := writeInitramfs(initrd, busybox, modDir, mods, guestInit(n, 3-n, mods)); err != nil {
			t.Fatal(err)
		}
		g := &guest{n: n, out: &testutil.LockedBuffer{}, passed: make(chan struct{})}
		g.cmd = exec.CommandContext(ctx, qemu,
			"-accel", "tcg", "-m", "256", "-nodefaults", "-nographic", "-no-reboot",
			"-serial", "stdio", "-monitor", "none",
			"-kernel", kernel, "-initrd", initrd,
			"-append", "console=ttyS0 panic=-1 quiet loglevel=3",
			"-netdev", "stream,id=n0,server=off,addr.type=unix,addr.path="+sw.SocketPath(n),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:12:34:%02x", n),
		)
		childproc.Tie(g.cmd) // a killed test run takes the guests along
		pr, pw := io.Pipe()
		g.cmd.Stdout, g.cmd.Stderr = pw, pw
		if err := g.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				g.out.WriteLine(sc.Text())
				if strings.Contains(sc.Text(), "HINIC-PING-OK") {
					close(g.passed)
				}
			}
		}()
		defer func() {
			childproc.KillGroup(g.cmd)
			g.cmd.Wait()
			pw.Close()
		}()
		guests = append(guests, g)
	}
	for _, g := range guests {
		select {
		case <-g.passed:
		case <-ctx.Done():
			for _, g := range guests {
				t.Logf("guest %d console:\n%s", g.n, g.out.String())
			}
			t.Logf("switch: %+v", sw.Status().Ports)
			t.Fatalf("guest %d did not reach the other through the switch", g.n)
		}
	}
	for _, g := range guests {
		t.Logf("guest %d console:\n%s", g.n, g.out.String())
	}
	st := sw.Status()
	for _, p := range st.Ports {
		if p.State != "up" || p.RxFrames == 0 || p.TxFrames == 0 {
			t.Errorf("port %d: %+v", p.Num, p)
		}
	}
	if len(st.FDB) < 2 {
		t.Errorf("FDB %+v", st.FDB)
	}
}

// guestInit is the guest's /init: load virtio-net, configure 10.42.0.n,
// ping 10.42.0.peer until it answers, say so on the console, then keep
// answering the peer's pings.
func guestInit(n, peer int, mods []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/busybox sh\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "/bin/busybox insmod /lib/modules/%s\n", filepath.Base(m))
	}
	fmt.Fprintf(&b, `B=/bin/busybox
$B ip link set lo up
$B ip addr add 10.42.0.%d/24 dev eth0
$B ip link set eth0 up
i=0
while [ $i -lt 90 ]; do
  if $B ping -c 1 -W 1 10.42.0.%d >/dev/null 2>&1; then
    echo HINIC-PING-OK
    break
  fi
  i=$((i+1))
done
[ $i -lt 90 ] || echo HINIC-PING-FAILED
$B sleep 120
$B poweroff -f
`, n, peer)
	return b.String()
}

// moduleOrder returns the modules to load, dependencies first, from
// modules.dep (which lists a module's dependencies so that the last is

// virtioBoot is what a test needs to boot busybox guests with virtio-net
// NICs: QEMU, the host's kernel and its modules, busybox, and a scratch
// directory removed at the end of the test.
type virtioBoot struct {
	qemu, kernel, busybox, modDir, dir string
	mods                               []string // virtio_pci, virtio_net and their dependencies, in load order
}

// virtioGuests skips a -short run, finds what virtioBoot holds (or skips
// naming the package to install) and makes the directory (prefix).
func virtioGuests(t *testing.T, prefix string) *virtioBoot {
	t.Helper()
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	modDir := filepath.Join("/lib/modules", release)
	_, err := os.Stat(filepath.Join(modDir, "modules.dep"))
	testutil.RequireTool(t, "modules of "+release, "apt-get install linux-image-"+release, err == nil)
	mods, err := moduleOrder(modDir, "kernel/drivers/virtio/virtio_pci.ko", "kernel/drivers/net/virtio_net.ko")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &virtioBoot{qemu: qemu, kernel: kernel, busybox: busybox, modDir: modDir, dir: dir, mods: mods}
}

// loaded first, as modprobe does).
func moduleOrder(modDir string, want ...string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if ok {
			deps[name] = strings.Fields(rest)
		}
	}
	var order []string
	for _, m := range want {
		d, ok := deps[m]
		if !ok {
			return nil, fmt.Errorf("%s not in modules.dep (built in?)", m)
		}
		for i := len(d) - 1; i >= 0; i-- {
			if !slices.Contains(order, d[i]) {
				order = append(order, d[i])
			}
		}
		if !slices.Contains(order, m) {
			order = append(order, m)
		}
	}
	return order, nil
}

// writeInitramfs writes a guest's initramfs: busybox, /init and the
// modules in /lib/modules.
func writeInitramfs(path, busybox, modDir string, mods []string, init string) error {
	w, err := testutil.BusyboxInitramfs(busybox, init, "lib", "lib/modules")
	if err != nil {
		return err
	}
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(modDir, m))
		if err != nil {
			return err
		}
		w.File("lib/modules/"+filepath.Base(m), 0o644, data)
	}
	return os.WriteFile(path, w.Bytes(), 0o644)
}
