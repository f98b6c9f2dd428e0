package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/qmp"
)

// RestartOptions shape RestartFabric and RestartDevice.
type RestartOptions struct {
	// Hinic is the binary that serves the new fabric or device
	// backend; "" is this one.
	Hinic string
	// Kill stops the process with SIGKILL, as a crash would, instead
	// of SIGTERM.
	Kill     bool
	Progress Progress
}

// RestartFabric stops the rack's `hinic fabric serve` and starts it again
// on the same configuration, leaving the guests and the device backend
// running. What reconnects, and how (docs/deploy.md, "Restarting the
// fabric"): the device backend redials its seqpacket ports and its
// guests see PORT_ERR then PORT_ACTIVE; the new switch dials every rxe
// guest's QEMU stream server. RC traffic resumes through retransmission
// when the outage fits the QPs' retry budget.
func RestartFabric(ctx context.Context, runDir string, o RestartOptions) (*State, error) {
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	if st.Down {
		return st, fmt.Errorf("deploy: the rack in %s is down (deploy rack brings it up)", runDir)
	}
	r := &st.Rack
	if o.Kill && alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		if proc, err := os.FindProcess(st.FabricPID); err == nil {
			_ = proc.Signal(syscall.SIGKILL)
		}
		for i := 0; i < 100 && alive(st.FabricPID, fabricProc(r, st.FabricExe)); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		p("fabric: killed (pid %d)", st.FabricPID)
	}
	if alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		if err := stop(st.FabricPID, fabricProc(r, st.FabricExe), "fabric", p); err != nil {
			return st, err
		}
	}
	st.FabricPID, st.FabricExe = 0, ""
	if err := startFabric(ctx, st, o.Hinic, p); err != nil {
		return st, err
	}
	return st, st.save()
}

// Re-plug bounds of RestartDevice. The guest's driver finds the dead
// backend within 3 s (its heartbeat watchdog) and its removal then runs
// no admin command to its timeout; under TCG on a loaded host the ACPI
// eject still takes seconds.
const (
	qmpDialTimeout  = 10 * time.Second
	unplugTimeout   = 120 * time.Second
	hotplugTimeout  = 120 * time.Second
	replugBusNumber = 0 // QEMUArgs puts the function on the root bus
	replugBus       = "pci.0"
)

// replugTarget is a running hicain guest and its QEMU monitor.
type replugTarget struct {
	g    Guest
	gs   *GuestState
	mon  *qmp.Client
	addr qmp.PCIAddr
}

// RestartDevice stops the rack's `hinic device serve` (SIGTERM, or
// SIGKILL with Kill) and starts it again on the same configuration and
// RAM files, then gives every running hicain guest a new HiNIC function
// on the new backend without rebooting it (docs/deploy.md, "Restarting
// the device backend"): QEMU's ivshmem-doorbell takes its backend's
// shared memory and doorbells once, at realize, so the old function is
// removed (QMP device_del, once the guest's driver let it go:
// DEVICE_DELETED) and a new one is realized on a new chardev at the same
// PCI address (chardev-remove, chardev-add, device_add). The guest's
// driver probes it; the data NIC is then set up again over SSH.
//
// Every running guest's monitor must answer before anything stops: a
// rack whose QEMUs predate the QMP socket is refused as it was.
func RestartDevice(ctx context.Context, runDir string, o RestartOptions) (*State, error) {
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	if st.Down {
		return st, fmt.Errorf("deploy: the rack in %s is down (deploy rack brings it up)", runDir)
	}
	r := &st.Rack
	if len(r.hicainGuests()) == 0 {
		return st, fmt.Errorf("deploy: the rack in %s has no hicain guests, so no device backend", runDir)
	}
	targets, err := replugTargets(ctx, st, p)
	defer func() {
		for _, t := range targets {
			t.mon.Close()
		}
	}()
	if err != nil {
		return st, err
	}

	if alive(st.DevicePID, deviceProc(r, st.DeviceExe)) {
		if o.Kill {
			if proc, err := os.FindProcess(st.DevicePID); err == nil {
				_ = proc.Signal(syscall.SIGKILL)
			}
			for i := 0; i < 100 && alive(st.DevicePID, deviceProc(r, st.DeviceExe)); i++ {
				time.Sleep(50 * time.Millisecond)
			}
			p("device: killed (pid %d)", st.DevicePID)
		}
	}
	if alive(st.DevicePID, deviceProc(r, st.DeviceExe)) {
		if err := stop(st.DevicePID, deviceProc(r, st.DeviceExe), "device", p); err != nil {
			return st, err
		}
	}
	st.DevicePID, st.DeviceExe = 0, ""
	if _, err := startDevice(ctx, st, o.Hinic, p); err != nil {
		_ = st.save()
		return st, err
	}
	if err := st.save(); err != nil {
		return st, err
	}

	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = replugGuest(ctx, st, targets[i], p)
		}()
	}
	wg.Wait()
	if err := st.save(); err != nil {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// replugTargets opens the QMP monitor of every running hicain guest and
// finds its HiNIC function. A guest that is not running is left to
// `deploy rack`, which boots it on the new backend.
func replugTargets(ctx context.Context, st *State, p Progress) ([]replugTarget, error) {
	r := &st.Rack
	var ts []replugTarget
	for _, g := range r.hicainGuests() {
		gs := st.Guest(g.Name)
		if gs == nil || !alive(gs.PID, qemuProc(gs.Dir)) {
			p("%s: not running (deploy rack boots it on the new backend)", g.Name)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, qmpDialTimeout)
		mon, err := qmp.Dial(dctx, QMPSocket(gs.Dir))
		if err == nil {
			var addr qmp.PCIAddr
			addr, err = mon.PCIAddress(dctx, HicainQdevID)
			if err == nil && addr.Bus != replugBusNumber {
				err = fmt.Errorf("%s is on PCI bus %d, not the root bus", HicainQdevID, addr.Bus)
			}
			if err != nil {
				mon.Close()
			} else {
				ts = append(ts, replugTarget{g: g, gs: gs, mon: mon, addr: addr})
			}
		}
		cancel()
		if err != nil {
			return ts, fmt.Errorf("deploy: %s: its QEMU cannot re-plug the HiNIC function: %w "+
				"(a QEMU started before deploy had QMP and the %s id cannot); nothing was stopped: "+
				"restart the rack instead: hinic deploy down, then hinic deploy rack", g.Name, err, HicainQdevID)
		}
	}
	return ts, nil
}

// replugGuest gives a running guest its new HiNIC function and sets its
// data NIC up again.
func replugGuest(ctx context.Context, st *State, t replugTarget, p Progress) error {
	r, g, gs := &st.Rack, t.g, t.gs
	t0 := time.Now()
	console := filepath.Join(gs.Dir, "console.log")
	p("%s: removing its HiNIC function (PCI 00:%02x.%x)", g.Name, t.addr.Slot, t.addr.Function)
	uctx, cancel := context.WithTimeout(ctx, unplugTimeout)
	err := t.mon.Unplug(uctx, HicainQdevID)
	cancel()
	if err != nil {
		return fmt.Errorf("deploy: %s: %w; its driver did not let the old function go within %v "+
			"(see %s and hinic deploy exec %s -- dmesg); reboot it: hinic deploy down, then hinic deploy rack",
			g.Name, err, unplugTimeout, console, g.Name)
	}
	p("%s: old function removed after %.1f s; plugging in the new one", g.Name, time.Since(t0).Seconds())
	f := qmp.Ivshmem{ID: HicainQdevID, Chardev: hicainChardev, Socket: IvshmemSocket(r, g),
		Vectors: hicainVectors, Bus: replugBus, Addr: t.addr}
	pctx, cancel := context.WithTimeout(ctx, qmpDialTimeout)
	err = t.mon.PlugIvshmem(pctx, f)
	cancel()
	if err != nil {
		return fmt.Errorf("deploy: %s: %w; the guest has no HiNIC function now: "+
			"reboot it: hinic deploy down, then hinic deploy rack", g.Name, err)
	}
	c, err := st.Connect(ctx, gs)
	if err != nil {
		return fmt.Errorf("deploy: %s: SSH: %w", g.Name, err)
	}
	defer c.Close()
	if err := waitHicainProbe(ctx, c, hotplugTimeout); err != nil {
		return fmt.Errorf("deploy: %s: %w (see %s and hinic deploy exec %s -- dmesg)", g.Name, err, console, g.Name)
	}
	if err := setupDataNIC(ctx, c, r, g, gs, p); err != nil {
		return fmt.Errorf("deploy: %s: data NIC on the new function: %w", g.Name, err)
	}
	p("%s: back on the new backend after %.1f s", g.Name, time.Since(t0).Seconds())
	return nil
}

// waitHicainProbe waits until the guest's ACPI hotplug found the new
// function and hicain_net bound it.
func waitHicainProbe(ctx context.Context, c *Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.Run(ctx, "ls -d /sys/bus/pci/drivers/"+hicainDriver+"/0000:* 2>/dev/null; true")
		if err == nil && strings.TrimSpace(out) != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s bound no PCI function within %v of device_add", hicainDriver, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
