package deploy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/image"
)

// Files in a rack's run directory.
const (
	FileState      = "state.json"
	FileKey        = "id_ed25519"
	FileKnownHosts = "known_hosts"
	FileFabricConf = "fabric.yaml"
	FileFabricLog  = "fabric.log"
	FileFabricPID  = "fabric.pid"
	DirFabric      = "fab"
	DirPcap        = "pcap"
)

// Progress receives one line per deploy step.
type Progress func(format string, a ...any)

// UpOptions are the inputs of Up besides the rack.
type UpOptions struct {
	// Hinic is the hinic binary that runs `fabric serve` and `device
	// serve` (default: this executable).
	Hinic    string
	Progress Progress
	// Prober decides accel: auto and accel: kvm (default: the KVM probe
	// with its cache in the user's cache directory).
	Prober *accel.Prober
	// Host, when set, deploys only that host's part of a rack that
	// spans hosts (Rack.HostRack), on this machine, in RUN-DIR/HOST: the
	// way each machine of a rack across machines deploys its own part.
	Host string
	// noMesh leaves out the guests' SSH mesh: a host's part of a rack
	// that spans hosts, whose mesh upHosts makes across all of them.
	noMesh bool
}

// Up deploys the rack: fabric, device backend (for hicain guests), guests,
// SSH, data NICs. It is idempotent: a process of the rack that is still
// running is kept, a guest already set up is only checked. On error what
// was started keeps running; Down stops it.
func Up(ctx context.Context, r *Rack, o UpOptions) (*State, error) {
	if err := r.Defaults(); err != nil {
		return nil, err
	}
	if o.Host != "" {
		sub := r.HostRack(o.Host)
		if sub == nil {
			return nil, fmt.Errorf("deploy: the rack has no host %q (its hosts: %s)", o.Host, r.hostNames())
		}
		r = sub
	} else if r.spansHosts() {
		return upHosts(ctx, r, o)
	}
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	if missing := image.MissingTools("qemu-system-x86_64", "qemu-img"); len(missing) > 0 {
		return nil, image.ErrMissingTools(missing)
	}
	if r.libvirt() != "" {
		if missing := image.MissingTools("virsh"); len(missing) > 0 {
			return nil, fmt.Errorf("deploy: host %s places its guests through libvirt: %w (Debian's libvirt-clients)", r.placed().Name, image.ErrMissingTools(missing))
		}
	}
	runDir, err := filepath.Abs(r.RunDir)
	if err != nil {
		return nil, err
	}
	r.RunDir = runDir
	if err := checkPaths(r); err != nil {
		return nil, err
	}
	if r.libvirt() != "" {
		if ok, why := r.useUnits(); ok {
			p("host %s: guests through libvirt %s, the fabric and the device backend as %s and %s (/usr/bin/hinic)",
				r.placed().Name, r.libvirt(), unitName(UnitFabric, runDir), unitName(UnitDevice, runDir))
		} else {
			p("host %s: guests through libvirt %s, the fabric and the backends as deploy's own processes: %s", r.placed().Name, r.libvirt(), why)
		}
	}
	// The run dir holds the SSH key and the guests' memory: it must be
	// private before anything is read from it or written to it.
	if err := ensurePrivateDir(runDir); err != nil {
		return nil, err
	}
	st, err := ReadState(runDir)
	if err != nil {
		st = &State{}
	}
	st.path = filepath.Join(runDir, FileState)
	st.Rack = *r
	st.Down = false
	if st.Started.IsZero() || !alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		st.Started = time.Now().UTC().Truncate(time.Second)
	}
	st.Timings = nil
	timed := func(step string, fn func() error) error {
		t := time.Now()
		err := fn()
		st.Timings = append(st.Timings, StepTiming{Step: step, Seconds: time.Since(t).Seconds()})
		return err
	}
	signer, pub, err := EnsureKey(filepath.Join(runDir, FileKey))
	if err != nil {
		return nil, err
	}
	// The accelerator comes first: accel: kvm on a host where KVM cannot
	// boot the guests' kernel is refused before anything starts.
	var accels map[string]string
	if err := timed("accel", func() (err error) {
		accels, st.AccelWhy, err = chooseAccel(ctx, r, o.Prober, p)
		return err
	}); err != nil {
		return st, err
	}

	if err := timed("fabric", func() error { return startFabric(ctx, st, o.Hinic, p) }); err != nil {
		return st, err
	}
	// The backend attaches to the fabric's ports and must listen before
	// QEMU starts: QEMU reads the ivshmem setup at start-up.
	if len(r.hicainGuests()) > 0 {
		err := timed("device", func() (err error) {
			st.deviceFresh, err = startDevice(ctx, st, o.Hinic, p)
			return err
		})
		if serr := st.save(); err == nil {
			err = serr
		}
		if err != nil {
			return st, err
		}
	} else if alive(st.DevicePID, deviceProc(r, st.DeviceExe)) {
		// The rack no longer has hicain guests.
		if err := stop(st.DevicePID, deviceProc(r, st.DeviceExe), "device", p); err != nil {
			return st, err
		}
		st.DevicePID, st.DeviceExe = 0, ""
	}
	// The HiLink switches before the GPU backend, which dials their
	// ports when it starts; a running backend redials a switch started
	// afresh.
	if err := timed("hilink", func() (err error) {
		_, err = startHiLinks(ctx, st, o.Hinic, p)
		return err
	}); err != nil {
		_ = st.save()
		return st, err
	}
	// The GPU backend likewise: QEMU connects to its ivshmem sockets at
	// start-up.
	if len(r.gpuGuests()) > 0 {
		err := timed("gpu", func() (err error) {
			st.gpuFresh, err = startGPU(ctx, st, o.Hinic, p)
			return err
		})
		if serr := st.save(); err == nil {
			err = serr
		}
		if err != nil {
			return st, err
		}
	} else if alive(st.GPUPID, gpuProc(r, st.GPUExe)) {
		// The rack no longer has guests with GPUs.
		if err := stop(st.GPUPID, gpuProc(r, st.GPUExe), "gpu", p); err != nil {
			return st, err
		}
		st.GPUPID, st.GPUExe = 0, ""
	}
	if err := st.save(); err != nil {
		return st, err
	}

	// Guests boot in parallel: under TCG each takes about a minute.
	prev := map[string]GuestState{}
	for _, g := range st.Guests {
		prev[g.Name] = g
	}
	st.Guests = make([]GuestState, len(r.Guests))
	var wg sync.WaitGroup
	errs := make([]error, len(r.Guests))
	for i := range r.Guests {
		g := r.Guests[i]
		gs := &st.Guests[i]
		*gs = GuestState{Name: g.Name, PID: prev[g.Name].PID, BootSec: prev[g.Name].BootSec,
			DataIP: g.IP, NIC: g.NIC, Link: g.Link, Accel: accels[g.Image], Dir: filepath.Join(runDir, g.Name)}
		gs.SSHAddr, gs.Netns = r.guestSSH(g)
		if uri := r.libvirt(); uri != "" {
			gs.Libvirt, gs.Domain = uri, DomainName(r, g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			err := upGuest(ctx, st, g, gs, signer, pub, p)
			if err != nil {
				gs.Error = err.Error()
				errs[i] = fmt.Errorf("deploy: guest %s: %w", g.Name, err)
			}
			st.mu.Lock()
			st.Timings = append(st.Timings, StepTiming{Step: "guest " + g.Name, Seconds: time.Since(t).Seconds()})
			st.mu.Unlock()
		}()
	}
	wg.Wait()
	if err := st.save(); err != nil {
		return st, err
	}
	if err := errors.Join(errs...); err != nil {
		return st, err
	}
	if o.noMesh {
		return st, st.save()
	}
	if err := timed("mesh", func() error { return setupMesh(ctx, st, p) }); err != nil {
		return st, err
	}
	return st, st.save()
}
