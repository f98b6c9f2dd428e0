package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/image"
	"github.com/PacketFive/hinic/internal/netns"
)

func startFabric(ctx context.Context, st *State, hinic string, p Progress) error {
	r := &st.Rack
	fabDir := filepath.Join(r.RunDir, DirFabric)
	if alive(st.FabricPID, fabricProc(r, st.FabricExe)) {
		if _, err := fabric.QueryStatus(ctx, fabDir); err == nil {
			p("fabric: already running (pid %d)", st.FabricPID)
			return nil
		}
	}
	if err := writePrivate(filepath.Join(r.RunDir, FileFabricConf), FabricConfig(r)); err != nil {
		return err
	}
	if r.Pcap {
		if err := ensureGuestDir(filepath.Join(r.RunDir, DirPcap)); err != nil {
			return err
		}
	}
	if r.joined() {
		// startDevice starts it, with the backend.
		p("fabric: %d switch(es) in %s, served by the device backend (daemons: %s)", len(r.Switches), fabDir, DaemonsJoined)
		return nil
	}
	pid, exe, err := r.spawn(ctx, hinic, daemon{what: "fabric", unit: UnitFabric,
		args:    []string{"fabric", "serve", "--config", filepath.Join(r.RunDir, FileFabricConf)},
		logPath: filepath.Join(r.RunDir, FileFabricLog), pidPath: filepath.Join(r.RunDir, FileFabricPID),
		ready: func() bool {
			_, err := os.Stat(filepath.Join(fabDir, fabric.ControlSocketName))
			return err == nil
		}})
	if pid != 0 {
		st.FabricPID, st.FabricExe = pid, exe
	}
	if err != nil {
		return err
	}
	p("fabric: serving %d switch(es) in %s (pid %d)", len(r.Switches), fabDir, st.FabricPID)
	return nil
}

// daemon is a hinic child that serves the rack: the fabric or the device
// backend.
type daemon struct {
	what             string   // "fabric", "device backend"
	args             []string // after the binary
	logPath, pidPath string
	ready            func() bool // its control socket answers
	procs            int         // its GOMAXPROCS (Rack.Procs, set by Rack.spawn); 0 leaves Go's default
	netns            string      // the network namespace it runs in (Rack.netns, set by Rack.spawn); "" for this one
	// unit is the host package's template unit that runs it on a
	// libvirt host with systemd (units.go): UnitFabric or UnitDevice.
	unit string
}

// spawn starts d, one of the rack's daemons, as spawn does, with the
// rack's GOMAXPROCS and in its host's network namespace: every daemon of
// a host runs where its host is.
func (r *Rack) spawn(ctx context.Context, hinic string, d daemon) (int, string, error) {
	d.procs, d.netns = r.Procs, r.netns()
	if ok, _ := r.useUnits(); ok && d.unit != "" {
		name := unitName(d.unit, r.RunDir)
		if logf, err := openPrivate(d.logPath, os.O_APPEND); err == nil {
			fmt.Fprintf(logf, "$ systemctl start %s (its log: journalctl -u %s)\n", name, name)
			logf.Close()
		}
		return spawnUnit(ctx, r.RunDir, d)
	}
	return spawn(ctx, hinic, d)
}

// spawn starts d with the hinic binary (default: this executable) in its
// own session, so that it outlives the command, its output appended to
// its log and its pid written to its pid file, and waits up to 15 s until
// it is ready. It returns the pid and the binary it ran, symlinks
// resolved (what the state records for alive), also with an error after
// the start.
func spawn(ctx context.Context, hinic string, d daemon) (int, string, error) {
	exe, err := resolveExe(hinic)
	if err != nil {
		return 0, "", fmt.Errorf("deploy: the hinic binary for the %s: %w (build it, or pass its path with --hinic)", d.what, err)
	}
	logf, err := openPrivate(d.logPath, os.O_APPEND)
	if err != nil {
		return 0, "", err
	}
	defer logf.Close()
	// The resolved path is run, not the name given: the kernel then
	// shows exactly the recorded path as the child's /proc/PID/exe,
	// whatever symlink or $PATH entry named it. In a namespace, ip
	// netns exec execs it in place: the pid is the backend's.
	argv := netns.Command(d.netns, append([]string{exe}, d.args...)...)
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if d.procs > 0 {
		// The last of duplicate keys wins: the spec over the caller's
		// environment.
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(d.procs))
	}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("starting the %s: %w", d.what, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	_ = writePrivate(d.pidPath, []byte(strconv.Itoa(pid)+"\n"))
	deadline := time.Now().Add(15 * time.Second)
	for !d.ready() {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(d.logPath)
			return pid, exe, fmt.Errorf("the %s exited: %v: %s (see %s)", d.what, err, lastLines(string(b), 3), d.logPath)
		case <-ctx.Done():
			return pid, exe, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return pid, exe, fmt.Errorf("the %s did not open its control socket in 15 s (see %s)", d.what, d.logPath)
		}
	}
	return pid, exe, nil
}

// resolveExe is the absolute, symlink-free path of the binary that
// exec would run for name ("" is this executable): the form the kernel
// gives as /proc/PID/exe.
func resolveExe(name string) (string, error) {
	if name == "" {
		var err error
		if name, err = os.Executable(); err != nil {
			return "", err
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(path)
}

// proc says which process a recorded pid must be for deploy to treat it
// as the rack's own: after a reboot or a crash the pid may be another
// program's, and stop would signal it. A pid counts only when its argv
// holds args as one contiguous run (paths inside the rack's run
// directory make that run unique to the rack) and its executable is the
// right one: for QEMU, whose binary deploy finds on $PATH and does not
// record, its name starts with exe; for the hinic backends, it is
// exactly path, the binary that started them. Arguments alone are not
// enough: any program (a shell, an editor) can be given the fabric's
// arguments.
type proc struct {
	exe  string // QEMU: the executable's name starts with exe
	path string // hinic: the executable, symlinks resolved, is path
	args []string
}

// hinicProc is a hinic backend run by the binary recorded in the state,
// exe. An older state recorded none: the binary reading it stands in,
// the one that usually deployed the rack (if not, deploy sees the
// backends as stopped rather than signal what it cannot vouch for).
func hinicProc(exe string, args ...string) proc {
	if exe == "" {
		// On Linux resolveExe fails only without /proc, where alive
		// cannot read any pid's cmdline either and so finds none
		// alive: the empty path weakens nothing.
		exe, _ = resolveExe("")
	}
	return proc{path: exe, args: args}
}

// imageID names an image's root disk: its checksum in the manifest.
func imageID(m *image.Manifest) string {
	for _, a := range m.Artifacts {
		if a.Name == image.FileQcow2 {
			return a.SHA256
		}
	}
	return m.KernelRelease
}

// fabricProc is the rack's `hinic fabric serve --config RUN/fabric.yaml`,
// run by exe (State.FabricExe).
func fabricProc(r *Rack, exe string) proc {
	if r.joined() {
		return deviceProc(r, exe)
	}
	return hinicProc(exe, "fabric", "serve", "--config", filepath.Join(r.RunDir, FileFabricConf))
}

// qemuProc is a guest's QEMU, which writes its pid file in dir.
func qemuProc(dir string) proc {
	return proc{exe: "qemu-system-", args: []string{"-pidfile", filepath.Join(dir, "qemu.pid")}}
}

// alive reports whether pid is running (not a zombie) and is the process
// want describes.
func alive(pid int, want proc) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// A zombie (our own unreaped child) is not running.
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 0 && f[0] == "Z" {
				return false
			}
		}
	}
	if want.exe != "" || want.path != "" {
		// A binary replaced since the process started (a rebuilt
		// hinic) shows as "PATH (deleted)": the process still is the
		// one that binary started.
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return false
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		if want.exe != "" && !strings.HasPrefix(filepath.Base(exe), want.exe) {
			return false
		}
		if want.path != "" && exe != want.path {
			return false
		}
	}
	return hasRun(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), want.args)
}

// hasRun reports whether argv holds run as contiguous elements after
// argv[0].
func hasRun(argv, run []string) bool {
	if len(argv) == 0 {
		return false
	}
	for i := 1; i+len(run) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// Down stops every process of the rack in runDir: guests first (SIGTERM,
// then SIGKILL after 10 s), then the device and GPU backends, then the
// fabric, and removes the RAM files of the hicain guests and of the
// guests with GPUs once nothing maps them. It
// reports what it stopped.
func Down(runDir string, p Progress) error {
	if p == nil {
		p = func(string, ...any) {}
	}
	st, err := ReadState(runDir)
	if err != nil {
		return err
	}
	if len(st.Hosts) > 0 {
		return downHosts(st, p)
	}
	var errs []error
	for i := range st.Guests {
		g := &st.Guests[i]
		if g.Domain != "" {
			if err := downDomain(runDir, g, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if g.PID == 0 {
			// A deploy interrupted before it saved the state: QEMU's
			// own pid file still names the process.
			g.PID = readPIDFile(filepath.Join(g.Dir, "qemu.pid"))
		}
		if err := stop(g.PID, qemuProc(g.Dir), g.Name, p); err != nil {
			errs = append(errs, err)
		}
	}
	if st.DevicePID == 0 {
		st.DevicePID = readPIDFile(filepath.Join(runDir, FileDevicePID))
	}
	if st.DevicePID != 0 || len(st.Rack.hicainGuests()) > 0 {
		if err := stop(st.DevicePID, deviceProc(&st.Rack, st.DeviceExe), "device", p); err != nil {
			errs = append(errs, err)
		}
	}
	if st.GPUPID == 0 {
		st.GPUPID = readPIDFile(filepath.Join(runDir, FileGPUPID))
	}
	if st.GPUPID != 0 || len(st.Rack.gpuGuests()) > 0 {
		if err := stop(st.GPUPID, gpuProc(&st.Rack, st.GPUExe), "gpu", p); err != nil {
			errs = append(errs, err)
		}
	}
	// The HiLink switches after the GPU backend, whose ports they are.
	if err := stopHiLinks(st, func(string) bool { return true }, p); err != nil {
		errs = append(errs, err)
	}
	if err := stop(st.FabricPID, fabricProc(&st.Rack, st.FabricExe), "fabric", p); err != nil {
		errs = append(errs, err)
	}
	stopUnits(&st.Rack)
	if len(errs) == 0 {
		// Guest RAM is worth nothing once QEMU and the backends are
		// gone, and the file is as large as the RAM the guest touched.
		for _, g := range st.Rack.ramGuests() {
			if err := os.Remove(GuestRAM(&st.Rack, g)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	st.Down = true
	if err := st.save(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func stop(pid int, want proc, name string, p Progress) error {
	if !alive(pid, want) {
		p("%s: not running", name)
		return nil
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	_ = proc.Signal(syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if !alive(pid, want) {
			p("%s: stopped (pid %d)", name, pid)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = proc.Signal(syscall.SIGKILL)
	for i := 0; i < 50; i++ {
		if !alive(pid, want) {
			p("%s: killed (pid %d)", name, pid)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("deploy: %s (pid %d) did not stop", name, pid)
}

// readPIDFile is the pid a pid file holds (a daemon's, QEMU's, libvirt's),
// 0 when the file is missing or holds no number.
func readPIDFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
