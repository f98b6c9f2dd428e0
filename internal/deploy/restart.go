package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	st, p, err := runningRack(runDir, o)
	if err != nil {
		return st, err
	}
	r := &st.Rack
	if r.joined() {
		p("fabric: it runs inside the device backend (daemons: %s): restarting the backend", DaemonsJoined)
		return RestartDevice(ctx, runDir, o)
	}
	if err := halt(st.FabricPID, fabricProc(r, st.FabricExe), "fabric", o.Kill, p); err != nil {
		return st, err
	}
	st.FabricPID, st.FabricExe = 0, ""
	if err := startFabric(ctx, st, o.Hinic, p); err != nil {
		return st, err
	}
	return st, st.save()
}

// RestartHiLink stops the rack's HiLink switches (`hinic link serve`:
// SIGTERM, or SIGKILL with Kill) and starts them again on the same
// configuration, leaving the guests and the GPU backend running: the
// backend's GPU ports dial their switch again, and RestartHiLink waits
// until every one is up. Peer copies running meanwhile fail with
// EHOSTUNREACH (docs/deploy.md, "Restarting a HiLink switch").
func RestartHiLink(ctx context.Context, runDir string, o RestartOptions) (*State, error) {
	st, p, err := runningRack(runDir, o)
	if err != nil {
		return st, err
	}
	r := &st.Rack
	sws := HiLinkSwitches(r)
	if len(sws) == 0 {
		return st, fmt.Errorf("deploy: the rack in %s runs no HiLink switch (no GPU cables to one)", runDir)
	}
	before := gpuRelinks(ctx, st)
	for _, sw := range sws {
		name := sw.HiLink.Name
		if err := halt(st.HiLinkPIDs[name], hilinkProc(r, name, st.HiLinkExe), "hilink "+name, o.Kill, p); err != nil {
			return st, err
		}
		delete(st.HiLinkPIDs, name)
	}
	if _, err := startHiLinks(ctx, st, o.Hinic, p); err != nil {
		_ = st.save()
		return st, err
	}
	if err := st.save(); err != nil {
		return st, err
	}
	if !alive(st.GPUPID, gpuProc(r, st.GPUExe)) || before == nil {
		p("gpu: the GPU backend is not running or not answering (deploy rack starts it)")
		return st, nil
	}
	n, err := waitGPULinks(ctx, st, before, gpuLinkTimeout)
	if err != nil {
		return st, err
	}
	p("gpu: every HiLink port of the GPU backend is up again (%d dialled again)", n)
	return st, nil
}

// Bounds of RestartDevice. The guest's driver finds the dead backend
// within 3 s (its heartbeat watchdog) and its removal then runs no admin
// command to its timeout; under TCG on a loaded host the ACPI hotplug
// of the new function still takes seconds.
const (
	qmpDialTimeout = 10 * time.Second
	releaseTimeout = 120 * time.Second
	hotplugTimeout = 120 * time.Second
	replugBus      = "pci.0" // the pc machine's root bus, QEMUArgs' bus
)

// replugTarget is a running hicain guest, its QEMU monitor and its
// current HiNIC function.
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
// the device backend"). QEMU's ivshmem-doorbell takes its backend's
// shared memory and doorbells once, at realize, so a new function is
// needed; and QEMU 7.2 cannot safely remove the old one under TCG (see
// qmp.Client.AddIvshmem), so the guest's driver lets it go (an unbind,
// over SSH) and it stays, dead, while the new one is plugged in beside
// it (chardev-add, device_add). The guest's driver probes it; the data
// NIC is then set up again over SSH.
//
// Every running guest's monitor must answer before anything stops: a
// rack whose QEMUs predate the QMP socket is refused as it was.
func RestartDevice(ctx context.Context, runDir string, o RestartOptions) (*State, error) {
	st, p, err := runningRack(runDir, o)
	if err != nil {
		return st, err
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

	if err := halt(st.DevicePID, deviceProc(r, st.DeviceExe), "device", o.Kill, p); err != nil {
		return st, err
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
		if gs != nil && gs.Domain != "" {
			return nil, fmt.Errorf("deploy: guest %s runs under libvirt (domain %s), whose monitor deploy does not own: "+
				"restarting the device backend under it is not supported; deploy down and deploy rack instead", g.Name, gs.Domain)
		}
		if gs == nil || !alive(gs.PID, qemuProc(gs.Dir)) {
			p("%s: not running (deploy rack boots it on the new backend)", g.Name)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, qmpDialTimeout)
		mon, err := qmp.Dial(dctx, QMPSocket(gs.Dir))
		if err == nil {
			var addr qmp.PCIAddr
			addr, err = mon.PCIAddress(dctx, hicainQdevID(gs.HicainGen))
			if err != nil {
				mon.Close()
			} else {
				ts = append(ts, replugTarget{g: g, gs: gs, mon: mon, addr: addr})
			}
		}
		cancel()
		if err != nil {
			return ts, fmt.Errorf("deploy: %s: its QEMU cannot give it a new HiNIC function: %w "+
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
	c, err := st.Connect(ctx, gs)
	if err != nil {
		return fmt.Errorf("deploy: %s: SSH: %w", g.Name, err)
	}
	defer c.Close()
	bdf := fmt.Sprintf("0000:%02x:%02x.%x", t.addr.Bus, t.addr.Slot, t.addr.Function)
	p("%s: releasing its old HiNIC function %s", g.Name, bdf)
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	out, err := c.Run(rctx, releaseScript("/sys", bdf))
	cancel()
	if err != nil {
		return fmt.Errorf("deploy: %s: %s did not let %s go within %v: %w: %s "+
			"(see %s and hinic deploy exec %s -- dmesg); reboot it: hinic deploy down, then hinic deploy rack",
			g.Name, hicainDriver, bdf, releaseTimeout, err, strings.TrimSpace(out), console, g.Name)
	}
	gen := gs.HicainGen + 1
	f := qmp.Ivshmem{ID: hicainQdevID(gen), Chardev: hicainChardevID(gen), Socket: IvshmemSocket(r, g),
		Vectors: hicainVectors, Bus: replugBus}
	pctx, cancel := context.WithTimeout(ctx, qmpDialTimeout)
	err = t.mon.AddIvshmem(pctx, f)
	cancel()
	if err != nil {
		return fmt.Errorf("deploy: %s: %w; the guest has no live HiNIC function now (each restart takes a "+
			"PCI slot of %s: %d so far): reboot it: hinic deploy down, then hinic deploy rack",
			g.Name, err, replugBus, gs.HicainGen)
	}
	gs.HicainGen = gen
	p("%s: plugged in %s after %.1f s", g.Name, f.ID, time.Since(t0).Seconds())
	if err := waitHicainProbe(ctx, c, hotplugTimeout); err != nil {
		return fmt.Errorf("deploy: %s: %w (see %s and hinic deploy exec %s -- dmesg)", g.Name, err, console, g.Name)
	}
	if err := setupDataNIC(ctx, c, r, g, gs, p); err != nil {
		return fmt.Errorf("deploy: %s: data NIC on the new function: %w", g.Name, err)
	}
	p("%s: back on the new backend after %.1f s", g.Name, time.Since(t0).Seconds())
	return nil
}

// releaseScript unbinds hicain_net from the PCI function bdf and keeps
// any driver from binding it again (driver_override names none). The
// unbind returns once the driver's remove did: on a dead device (its
// backend's heartbeat stopped) no admin command waits for its timeout,
// and hicain_ib's disassociate_ucontext lets it go under open verbs
// contexts.
//
// It first asks the guest's PCI core to give ivshmem functions added
// from now on a 4 KiB BAR0 (ivshmemAlignment in
// /sys/bus/pci/resource_alignment, kept beside what is there). SeaBIOS
// gives the functions present at boot a page each; a hot-plugged one
// got its 256 bytes packed into a page with other BARs, so hicain_net
// could not map its doorbell to processes ("BAR0 shares its page") and
// the guest lost kernel bypass until it rebooted.
func releaseScript(sysfs, bdf string) string {
	d := sysfs + "/bus/pci/devices/" + bdf
	a := sysfs + "/bus/pci/resource_alignment"
	return "set -e\n" +
		"test -e " + d + " || { echo 'no PCI function " + bdf + "'; exit 1; }\n" +
		"if [ -w " + a + " ]; then cur=$(cat " + a + "); case \"$cur\" in\n" +
		"  *" + ivshmemAlignment + "*) ;;\n" +
		"  '') echo '" + ivshmemAlignment + "' > " + a + " ;;\n" +
		"  *) echo \"$cur;" + ivshmemAlignment + "\" > " + a + " ;;\n" +
		"esac; fi\n" +
		"echo none > " + d + "/driver_override\n" +
		"if [ -e " + d + "/driver ]; then echo " + bdf + " > " + d + "/driver/unbind; fi\n"
}

// ivshmemAlignment is a resource_alignment entry of the Linux PCI core
// (Documentation/admin-guide/kernel-parameters: pci=resource_alignment):
// 2^12-byte BARs for QEMU's ivshmem functions, vendor 1af4 device 1110.
const ivshmemAlignment = "12@pci:1af4:1110"

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

// halt stops a backend of the rack for a restart: with kill, SIGKILL
// first, as a crash would, and a wait of up to 5 s for it to go; then
// the ordinary stop for whatever still runs.
func halt(pid int, pr proc, what string, kill bool, p Progress) error {
	if kill && alive(pid, pr) {
		if proc, err := os.FindProcess(pid); err == nil {
			_ = proc.Signal(syscall.SIGKILL)
		}
		for i := 0; i < 100 && alive(pid, pr); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		p("%s: killed (pid %d)", what, pid)
	}
	if alive(pid, pr) {
		return stop(pid, pr, what, p)
	}
	return nil
}

// runningRack reads the state of a rack that is up, for a restart, and
// returns it with o's progress function (a no-op when unset).
func runningRack(runDir string, o RestartOptions) (*State, Progress, error) {
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	st, err := ReadState(runDir)
	if err != nil {
		return nil, p, err
	}
	if st.Down {
		return st, p, fmt.Errorf("deploy: the rack in %s is down (deploy rack brings it up)", runDir)
	}
	if len(st.Hosts) > 0 {
		return st, p, fmt.Errorf("deploy: the rack in %s spans hosts; restart one host's part with --host (%s)", runDir, st.Rack.hostNames())
	}
	return st, p, nil
}

// RestartComponents are what deploy restart restarts.
var RestartComponents = []string{"fabric", "device", "hilink"}

// Restart restarts component (RestartComponents) of the rack in runDir:
// RestartFabric, RestartDevice or RestartHiLink. It returns the rack's
// state after it.
func Restart(ctx context.Context, runDir, component string, o RestartOptions) (*State, error) {
	switch component {
	case "fabric":
		return RestartFabric(ctx, runDir, o)
	case "device":
		return RestartDevice(ctx, runDir, o)
	case "hilink":
		return RestartHiLink(ctx, runDir, o)
	}
	return nil, errComponent(component)
}

// errComponent is the error of a component deploy restart does not know.
func errComponent(component string) error {
	return fmt.Errorf("deploy: restart what? %s, not %q", strings.Join(RestartComponents, ", "), component)
}

// RestartPart restarts component of host's part of the rack across
// hosts in runDir, as Restart does on that part's run directory: here
// for a host of this machine (a netns host, or the one without either),
// and for a host reached over SSH by that machine's own hinic (hinic
// deploy restart COMPONENT --run-dir PART -o json, with --kill, and with
// --hinic when o names a binary: a path on that machine), its output
// passed to o's progress. The rack's state then takes that host's
// guests as the part's restart left them: a guest given a new HiNIC
// function has a new RDMA device and netdev name.
func RestartPart(ctx context.Context, runDir, host, component string, o RestartOptions) (*State, error) {
	if !slices.Contains(RestartComponents, component) {
		return nil, errComponent(component)
	}
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	if len(st.Hosts) == 0 {
		return st, fmt.Errorf("deploy: the rack in %s does not span hosts: leave out --host %s", runDir, host)
	}
	i := slices.IndexFunc(st.Hosts, func(h HostState) bool { return h.Name == host })
	if i < 0 {
		return st, fmt.Errorf("deploy: the rack in %s has no host %q (its hosts: %s)", runDir, host, st.Rack.hostNames())
	}
	h := st.Hosts[i]
	var part *State
	if h.SSH == "" {
		part, err = Restart(ctx, h.RunDir, component, o)
	} else {
		part, err = h.restartRemote(ctx, component, o)
	}
	if part != nil {
		st.takeGuests(part)
		if serr := st.save(); err == nil {
			err = serr
		}
	}
	return st, err
}

// restartRemote runs deploy restart on ssh host h's part and returns the
// part's state it printed.
func (h HostState) restartRemote(ctx context.Context, component string, o RestartOptions) (*State, error) {
	args := []string{h.hinic(), "deploy", "restart", component, "--run-dir", h.RunDir, "-o", "json"}
	if o.Kill {
		args = append(args, "--kill")
	}
	if o.Hinic != "" {
		args = append(args, "--hinic", o.Hinic)
	}
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	p("host %s: restarting its %s over ssh %s", h.Name, component, h.SSH)
	out, err := h.Host.sshRun(ctx, nil, func(format string, a ...any) { p(h.Name+": "+format, a...) }, shellJoin(args...))
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, err
	}
	part := &State{}
	if jerr := json.Unmarshal(out, part); jerr != nil {
		return nil, errors.Join(err, fmt.Errorf("host %s: the state its restart printed: %w", h.Name, jerr))
	}
	return part, err
}

// takeGuests replaces the rack's guests that a host's part has with the
// part's own states of them.
func (s *State) takeGuests(part *State) {
	for _, g := range part.Guests {
		if i := slices.IndexFunc(s.Guests, func(x GuestState) bool { return x.Name == g.Name }); i >= 0 {
			s.Guests[i] = g
		}
	}
}
