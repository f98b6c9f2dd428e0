package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/PacketFive/hinic/internal/image"
	"github.com/PacketFive/hinic/internal/netns"
)

func upGuest(ctx context.Context, st *State, g Guest, gs *GuestState, signer ssh.Signer, pub string, p Progress) error {
	r := &st.Rack
	imageDir, err := filepath.Abs(g.Image)
	if err != nil {
		return err
	}
	m, err := image.ReadManifest(imageDir)
	if err != nil {
		return fmt.Errorf("image %s: %w (run hinic image build)", imageDir, err)
	}
	if err := ensureGuestDir(gs.Dir); err != nil {
		return err
	}
	t0 := time.Now()
	running := alive(gs.PID, qemuProc(gs.Dir))
	if gs.Domain != "" {
		if running, err = domainRunning(ctx, r.RunDir, gs); err != nil {
			return err
		}
		if running {
			// libvirt may have started it since the state was saved.
			gs.PID = domainPID(gs.Libvirt, gs.Domain)
		}
	}
	if running && ((g.NIC == NICHicain && st.deviceFresh) || (g.GPUs.Count > 0 && st.gpuFresh)) {
		p("%s: booting again: a device backend was restarted", g.Name)
		if gs.Domain != "" {
			err = virsh{uri: gs.Libvirt}.remove(ctx, gs.Domain)
		} else {
			err = stop(gs.PID, qemuProc(gs.Dir), g.Name, p)
		}
		if err != nil {
			return err
		}
		running = false
	}
	if running {
		p("%s: already running (pid %d)", g.Name, gs.PID)
	} else {
		disk := filepath.Join(gs.Dir, "disk.qcow2")
		// An overlay is only valid on the exact image it was made on: a
		// rebuilt image under the same path would read as a corrupt
		// disk. The overlay then starts again from the new image.
		base := filepath.Join(gs.Dir, "disk.base")
		want := imageID(m)
		if b, err := os.ReadFile(base); err == nil && strings.TrimSpace(string(b)) != want {
			p("%s: the image changed since its disk was made: starting a fresh disk", g.Name)
			if err := os.Remove(disk); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		} else if err != nil {
			// A disk from before deploy recorded its base: keep nothing
			// of unknown origin.
			_ = os.Remove(disk)
		}
		if _, err := os.Stat(disk); err != nil {
			out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
				"-b", filepath.Join(imageDir, image.FileQcow2), disk).CombinedOutput()
			if err != nil {
				return fmt.Errorf("qemu-img create: %v: %s", err, out)
			}
			if err := writePrivate(base, []byte(want+"\n")); err != nil {
				return err
			}
			if err := ForgetHostKey(filepath.Join(r.RunDir, FileKnownHosts), gs.SSHAddr); err != nil {
				return err
			}
		}
		if g.GPUs.Count > 0 {
			if err := waitGPUsFree(ctx, r, g, gpuFreeTimeout); err != nil {
				return err
			}
		}
		if gs.Domain != "" {
			if err := startDomain(ctx, r, g, gs, m, imageDir, pub); err != nil {
				return err
			}
			p("%s: libvirt domain %s started through %s (pid %d, %s, SSH %s, console %s)", g.Name, gs.Domain, gs.Libvirt,
				gs.PID, gs.Accel, gs.SSHAddr, filepath.Join(gs.Dir, "console.log"))
		} else if err := startQEMU(r, g, gs, m, imageDir, pub, p); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, r.BootTimeout.Duration)
	defer cancel()
	c, err := waitSSHIn(wctx, gs.Netns, gs.SSHAddr, signer, filepath.Join(r.RunDir, FileKnownHosts))
	if err != nil {
		return fmt.Errorf("%w; %s", err, consoleHint(filepath.Join(gs.Dir, "console.log"), gs.Accel))
	}
	defer c.Close()
	if !running {
		gs.BootSec = time.Since(t0).Seconds()
	}
	p("%s: SSH ready after %.1f s", g.Name, time.Since(t0).Seconds())
	if err := setupGuest(ctx, c, r, g, gs, p); err != nil {
		return err
	}
	gs.Ready = true
	return nil
}

// startQEMU starts guest g's QEMU as deploy's own child (QEMUArgs), in
// its host's network namespace.
func startQEMU(r *Rack, g Guest, gs *GuestState, m *image.Manifest, imageDir, pub string, p Progress) error {
	logf, err := openPrivate(filepath.Join(gs.Dir, "qemu.log"), os.O_APPEND)
	if err != nil {
		return err
	}
	args := QEMUArgs(r, g, m, imageDir, gs.Dir, gs.Accel, pub)
	fmt.Fprintf(logf, "$ qemu-system-x86_64 %s\n", strings.Join(args, " "))
	argv := netns.Command(gs.Netns, append([]string{"qemu-system-x86_64"}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	gs.PID = cmd.Process.Pid
	gs.HicainGen = 0 // QEMUArgs' function: hicain0 on ivs0
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p("%s: QEMU started (pid %d, %s, SSH %s, console %s)", g.Name, gs.PID, gs.Accel, gs.SSHAddr, filepath.Join(gs.Dir, "console.log"))
	select {
	case <-exited:
		b, _ := os.ReadFile(filepath.Join(gs.Dir, "qemu.log"))
		return fmt.Errorf("QEMU exited at once: %s", lastLines(string(b), 3))
	case <-time.After(500 * time.Millisecond):
	}
	return nil
}

// setupGuest pushes files and packages and brings up the data NIC. Every
// command is idempotent.
func setupGuest(ctx context.Context, c *Client, r *Rack, g Guest, gs *GuestState, p Progress) error {
	for _, f := range g.Files {
		local, remote, ok := strings.Cut(f, ":")
		if !ok {
			return fmt.Errorf("files: %q is not LOCAL:REMOTE", f)
		}
		if err := c.Upload(ctx, local, remote, "0644"); err != nil {
			return fmt.Errorf("upload %s: %w", local, err)
		}
	}
	if len(g.Debs) > 0 {
		var remote []string
		for _, d := range g.Debs {
			dst := "/root/" + filepath.Base(d)
			if err := c.Upload(ctx, d, dst, "0644"); err != nil {
				return fmt.Errorf("upload %s: %w", d, err)
			}
			remote = append(remote, dst)
		}
		if out, err := c.Run(ctx, "dpkg -i "+strings.Join(remote, " ")); err != nil {
			return fmt.Errorf("installing packages: %w\n%s", err, lastLines(out, 10))
		}
		p("%s: installed %d package(s)", g.Name, len(remote))
		// The image's own copies of these modules were loaded at boot
		// (udev, by the devices' modaliases): let them go, so that the
		// data NIC's and the GPUs' set-up below load the new files.
		out, err := c.Run(ctx, unloadScript("/sys/module", "rmmod", remote))
		if err != nil {
			return fmt.Errorf("unloading the modules the packages replace: %w\n%s", err, lastLines(out, 10))
		}
		if s := strings.TrimSpace(out); s != "" {
			p("%s: %s", g.Name, s)
		}
	}
	if err := setupDataNIC(ctx, c, r, g, gs, p); err != nil {
		return err
	}
	if g.GPUs.Count > 0 {
		if err := setupGPUs(ctx, c, g, p); err != nil {
			return err
		}
	}
	// Let the boot finish before anyone measures: under TCG, units still
	// starting after sshd skew the first figures. Bounded; "degraded" is
	// reported, not fatal.
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, _ := c.Run(wctx, "systemctl is-system-running --wait")
	if st := strings.TrimSpace(out); st != "running" {
		p("%s: systemd reports %q (systemctl --failed lists the units)", g.Name, st)
	}
	return nil
}

// setupDataNIC brings up the guest's data NIC and its RDMA device (the
// HiNIC drivers' netdev or IPoIB, or Soft-RoCE on the virtio NIC), and
// waits for the RDMA port to become ACTIVE. Every command is
// idempotent: a restart of the device backend runs it again on the
// guest's new function.
func setupDataNIC(ctx context.Context, c *Client, r *Rack, g Guest, gs *GuestState, p Progress) error {
	switch g.NIC {
	case NICHicain:
		setup := func() (string, string, error) { return setupHicain(ctx, c, r, g) }
		if g.Link == LinkIB {
			setup = func() (string, string, error) { return setupHicainIB(ctx, c, r, g, p) }
		}
		nic, dev, err := setup()
		gs.DataNIC, gs.RDMADev = nic, dev
		if err != nil {
			return err
		}
	default:
		if err := setupRxe(ctx, c, r, g, gs); err != nil {
			return err
		}
	}
	nic := gs.DataNIC
	// Wait for the RDMA port to become ACTIVE (rxe follows the netdev;
	// hicain the device's link, which the switch port gives).
	for i := 0; ; i++ {
		out, err := c.Run(ctx, "cat /sys/class/infiniband/"+gs.RDMADev+"/ports/1/state")
		if err == nil && strings.Contains(out, "ACTIVE") {
			break
		}
		if i == 30 {
			return fmt.Errorf("%s port 1 is not ACTIVE after 30 s: %s", gs.RDMADev, strings.TrimSpace(out))
		}
		time.Sleep(time.Second)
	}
	if g.Link == LinkIB {
		p("%s: %s is ACTIVE, data IP %s/%d on IPoIB %s", g.Name, gs.RDMADev, g.IP, r.PrefixLen(), nic)
	} else {
		p("%s: %s on %s (%s) is ACTIVE, data IP %s/%d", g.Name, gs.RDMADev, nic, g.MAC, g.IP, r.PrefixLen())
	}
	return nil
}

// setupRxe brings up the virtio data NIC, found by its MAC whatever udev
// named it, and adds Soft-RoCE on it.
func setupRxe(ctx context.Context, c *Client, r *Rack, g Guest, gs *GuestState) error {
	out, err := c.Run(ctx, fmt.Sprintf(`for d in /sys/class/net/*; do [ "$(cat $d/address)" = %q ] && basename $d; done; true`, g.MAC))
	if err != nil {
		return err
	}
	nic := strings.TrimSpace(out)
	if nic == "" || strings.Contains(nic, "\n") {
		return fmt.Errorf("no single netdev with MAC %s in the guest (got %q)", g.MAC, nic)
	}
	gs.DataNIC = nic
	gs.RDMADev = "rxe0"
	script := fmt.Sprintf("set -e; ip link set dev %[1]s up", nic)
	if r.MTU > 0 {
		script += fmt.Sprintf("; ip link set dev %s mtu %d", nic, r.MTU)
	}
	script += fmt.Sprintf("; ip addr replace %s/%d dev %s", g.IP, r.PrefixLen(), nic)
	script += fmt.Sprintf("; modprobe rdma_rxe; rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev %s", nic)
	if out, err := c.Run(ctx, script); err != nil {
		return fmt.Errorf("data NIC: %w\n%s", err, out)
	}
	return nil
}

// unloadScript is the guest shell script that unloads every module that
// the .deb files debs ship and that is loaded (a directory under
// sysmodule), with rmmod, dependents first: it tries each in turn and
// repeats while one goes. It prints what it unloaded, and fails naming
// the modules still loaded (one in use).
func unloadScript(sysmodule, rmmod string, debs []string) string {
	return `set -e
mods=$(for d in ` + strings.Join(debs, " ") + `; do dpkg-deb -c "$d"; done | sed -n 's#.*/\([^/]*\)\.ko\(\.[gx]z\)\{0,1\}$#\1#p' | tr - _ | sort -u)
left=
for m in $mods; do [ -d ` + sysmodule + `/$m ] && left="$left $m"; done
[ -z "$left" ] && exit 0
gone=
while [ -n "$left" ]; do
	again=
	for m in $left; do
		if ` + rmmod + ` "$m" 2>/dev/null; then gone="$gone $m"; else again="$again $m"; fi
	done
	[ "$again" = "$left" ] && { echo "modules still loaded (in use):$left"; exit 1; }
	left=$again
done
echo "unloaded the image's modules:$gone"
`
}
