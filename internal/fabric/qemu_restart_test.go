package fabric_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/childproc"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/testutil"
)

// TestQEMUStreamServerRestart boots two stock QEMU 7.2 guests (TCG)
// whose virtio-net NICs are -netdev stream,server=on sockets that the
// switch's qemu-stream ports dial. The guests ping each other all the
// time. The fabric is closed (the pings fail: the outage is real), and
// a new fabric on the same configuration dials both QEMUs again, which
// take the new client (QEMU re-arms its listener when a client leaves),
// and the pings succeed again with no guest reboot.
func TestQEMUStreamServerRestart(t *testing.T) {
	g := virtioGuests(t, "hqr")
	qemu, kernel, busybox, modDir, mods, dir := g.qemu, g.kernel, g.busybox, g.modDir, g.mods, g.dir
	sock := func(n int) string { return filepath.Join(dir, fmt.Sprintf("vm%d.sock", n)) }
	cfg := fabric.Config{RunDir: filepath.Join(dir, "fab"), Switches: []fabric.SwitchConfig{{
		Ports: 2, Port: []fabric.PortConfig{{Num: 1, Kind: fabric.KindQEMUStream, Dial: sock(1)},
			{Num: 2, Kind: fabric.KindQEMUStream, Dial: sock(2)}},
	}}}
	start := func() *fabric.Fabric {
		f, err := fabric.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
		return f
	}

	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second) // hang guard
	defer cancel()
	type guest struct {
		n   int
		out *testutil.LockedBuffer
		mu  sync.Mutex
		ok  int // HINIC-PING-OK lines so far
		bad int // HINIC-PING-FAIL lines so far
	}
	var guests []*guest
	for n := 1; n <= 2; n++ {
		initrd := filepath.Join(t.TempDir(), "initrd.cpio")
		if err := writeInitramfs(initrd, busybox, modDir, mods, pingForever(n, 3-n, mods)); err != nil {
			t.Fatal(err)
		}
		g := &guest{n: n, out: &testutil.LockedBuffer{}}
		cmd := exec.CommandContext(ctx, qemu,
			"-accel", "tcg", "-m", "256", "-nodefaults", "-nographic", "-no-reboot",
			"-serial", "stdio", "-monitor", "none",
			"-kernel", kernel, "-initrd", initrd,
			"-append", "console=ttyS0 panic=-1 quiet loglevel=3",
			"-netdev", "stream,id=n0,server=on,addr.type=unix,addr.path="+sock(n),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:12:34:%02x", n),
		)
		childproc.Tie(cmd) // a killed test run takes the guests along
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				g.out.WriteLine(sc.Text())
				g.mu.Lock()
				if strings.Contains(sc.Text(), "HINIC-PING-OK") {
					g.ok++
				} else if strings.Contains(sc.Text(), "HINIC-PING-FAIL") {
					g.bad++
				}
				g.mu.Unlock()
			}
		}()
		defer func() {
			childproc.KillGroup(cmd)
			cmd.Wait()
			pw.Close()
		}()
		guests = append(guests, g)
	}
	// wait waits until every guest's counts pass what cond asks.
	wait := func(what string, cond func(i, ok, bad int) bool) {
		t.Helper()
		for {
			done := true
			for i, g := range guests {
				g.mu.Lock()
				if !cond(i, g.ok, g.bad) {
					done = false
				}
				g.mu.Unlock()
			}
			if done {
				return
			}
			if ctx.Err() != nil {
				for _, g := range guests {
					t.Logf("guest %d console:\n%s", g.n, g.out.String())
				}
				t.Fatalf("%s: not within the hang guard", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	counts := func() (ok, bad []int) {
		for _, g := range guests {
			g.mu.Lock()
			ok, bad = append(ok, g.ok), append(bad, g.bad)
			g.mu.Unlock()
		}
		return ok, bad
	}
	// QEMU creates its sockets at start; the switch dials until they
	// are there.
	f := start()
	wait("first pings", func(_, ok, _ int) bool { return ok > 0 })
	f.Close()
	_, bad0 := counts()
	wait("pings failing with the fabric down", func(i, _, bad int) bool { return bad > bad0[i] })
	ok1, _ := counts()
	f = start()
	defer f.Close()
	wait("pings after the restart", func(i, ok, _ int) bool { return ok > ok1[i] })
	for _, p := range f.Switches()[0].Status().Ports {
		if p.State != "up" || p.RxFrames == 0 || p.TxFrames == 0 {
			t.Errorf("port %d after the restart: %+v", p.Num, p)
		}
	}
}

// pingForever is a guest's /init: load virtio-net, configure 10.42.0.n,
// then ping 10.42.0.peer once a second forever, saying on the console
// whether each ping was answered.
func pingForever(n, peer int, mods []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/busybox sh\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "/bin/busybox insmod /lib/modules/%s\n", filepath.Base(m))
	}
	fmt.Fprintf(&b, `B=/bin/busybox
$B ip link set lo up
$B ip addr add 10.42.0.%d/24 dev eth0
$B ip link set eth0 up
while true; do
  if $B ping -c 1 -W 1 10.42.0.%d >/dev/null 2>&1; then
    echo HINIC-PING-OK
    $B sleep 1
  else
    echo HINIC-PING-FAIL
  fi
done
`, n, peer)
	return b.String()
}
