package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/gpu"
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

// State is what a deployed rack leaves in its run directory (state.json).
type State struct {
	Rack      Rack      `json:"rack"`
	Started   time.Time `json:"started"`
	FabricPID int       `json:"fabric_pid"`
	DevicePID int       `json:"device_pid,omitempty"` // hinic device serve, with hicain guests
	GPUPID    int       `json:"gpu_pid,omitempty"`    // hinic gpu serve, with guests that have GPUs
	// FabricExe, DeviceExe and GPUExe are the hinic binaries, symlinks
	// resolved, that started the fabric and the device and GPU
	// backends: a recorded pid is the rack's process only when it runs
	// that binary (see proc). A state written before they were recorded
	// has them empty, and the binary reading it stands in for them.
	FabricExe string       `json:"fabric_exe,omitempty"`
	DeviceExe string       `json:"device_exe,omitempty"`
	GPUExe    string       `json:"gpu_exe,omitempty"`
	Guests    []GuestState `json:"guests"`
	Timings   []StepTiming `json:"timings"`
	Down      bool         `json:"down"`
	// AccelWhy says why the guests run under their accelerator (the KVM
	// probe's verdict, one line per guest kernel).
	AccelWhy []string `json:"accel_why,omitempty"`

	mu   sync.Mutex // guards the fields above while guests boot in parallel
	path string
	// deviceFresh is set when this Up started the device backend: a
	// hicain guest's QEMU still running from before is attached to
	// nothing and boots again.
	deviceFresh bool
	// gpuFresh is the same for the GPU backend and the guests with
	// GPUs.
	gpuFresh bool
}

// GuestState is a guest of a deployed rack.
type GuestState struct {
	Name    string  `json:"name"`
	PID     int     `json:"pid"`
	SSHAddr string  `json:"ssh_addr"`
	DataIP  string  `json:"data_ip"`
	DataNIC string  `json:"data_nic"` // the guest's netdev name, e.g. ens4
	RDMADev string  `json:"rdma_dev"` // e.g. rxe0
	NIC     string  `json:"nic"`
	Link    string  `json:"link"`  // eth (RoCEv2) or ib (native InfiniBand; DataNIC is IPoIB)
	Accel   string  `json:"accel"` // tcg or kvm
	Dir     string  `json:"dir"`
	BootSec float64 `json:"boot_to_ssh_s"`
	// HicainGen counts the HiNIC functions deploy restart device gave
	// the running QEMU: the current one is hicainQdevID(HicainGen) on
	// chardev hicainChardevID(HicainGen); 0 is QEMUArgs' own.
	HicainGen int    `json:"hicain_gen,omitempty"`
	Ready     bool   `json:"ready"`
	Error     string `json:"error,omitempty"`
}

// StepTiming records how long a deploy step took.
type StepTiming struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

// ReadState reads the state of the rack in runDir.
func ReadState(runDir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(runDir, FileState))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (deploy a rack first)", ErrNotDeployed, runDir)
	}
	if err != nil {
		return nil, err
	}
	// The state names processes to stop and the key to trust: only a
	// private run dir's is believed.
	if err := checkPrivateDir(runDir); err != nil {
		return nil, err
	}
	s := &State{path: filepath.Join(runDir, FileState)}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("deploy: %s: %w", s.path, err)
	}
	return s, nil
}

func (s *State) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := writePrivate(tmp, append(b, '\n')); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// Guest returns the state of the named guest.
func (s *State) Guest(name string) *GuestState {
	for i := range s.Guests {
		if s.Guests[i].Name == name {
			return &s.Guests[i]
		}
	}
	return nil
}

// Connect opens SSH to a deployed guest.
func (s *State) Connect(ctx context.Context, g *GuestState) (*Client, error) {
	signer, _, err := EnsureKey(filepath.Join(s.Rack.RunDir, FileKey))
	if err != nil {
		return nil, err
	}
	return Dial(ctx, g.SSHAddr, signer, filepath.Join(s.Rack.RunDir, FileKnownHosts))
}

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
}

// Up deploys the rack: fabric, device backend (for hicain guests), guests,
// SSH, data NICs. It is idempotent: a process of the rack that is still
// running is kept, a guest already set up is only checked. On error what
// was started keeps running; Down stops it.
func Up(ctx context.Context, r *Rack, o UpOptions) (*State, error) {
	if err := r.Defaults(); err != nil {
		return nil, err
	}
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	if missing := image.MissingTools("qemu-system-x86_64", "qemu-img"); len(missing) > 0 {
		return nil, image.ErrMissingTools(missing)
	}
	runDir, err := filepath.Abs(r.RunDir)
	if err != nil {
		return nil, err
	}
	r.RunDir = runDir
	if err := checkPaths(r); err != nil {
		return nil, err
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
		*gs = GuestState{Name: g.Name, PID: prev[g.Name].PID, BootSec: prev[g.Name].BootSec, SSHAddr: fmt.Sprintf("127.0.0.1:%d", g.SSHPort),
			DataIP: g.IP, NIC: g.NIC, Link: g.Link, Accel: accels[g.Image], Dir: filepath.Join(runDir, g.Name)}
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
	if err := timed("mesh", func() error { return setupMesh(ctx, st, p) }); err != nil {
		return st, err
	}
	return st, st.save()
}

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
	pid, exe, err := spawn(ctx, hinic, daemon{what: "fabric", procs: r.Procs,
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
	procs            int         // its GOMAXPROCS (Rack.Procs); 0 leaves Go's default
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
	fmt.Fprintf(logf, "$ %s %s\n", exe, strings.Join(d.args, " "))
	// The resolved path is run, not the name given: the kernel then
	// shows exactly the recorded path as the child's /proc/PID/exe,
	// whatever symlink or $PATH entry named it.
	cmd := exec.Command(exe, d.args...)
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

// FabricConfig is the `hinic fabric serve --config` file of the rack: the
// port of an rxe guest is a qemu-stream port that dials the guest's QEMU
// (-netdev stream,server=on at StreamSocket), the port of a hicain guest
// a seqpacket port (the device backend's). The switch dials QEMU, and
// not the other way round, so that a restarted fabric reaches every
// running guest again: QEMU 7.2's stream client has no reconnect, but
// its server takes a new client once the last one has left.
func FabricConfig(r *Rack) []byte {
	type port struct {
		Num        int    `yaml:"num"`
		Kind       string `yaml:"kind,omitempty"`
		Link       string `yaml:"link,omitempty"`
		Dial       string `yaml:"dial,omitempty"`
		TrustPause bool   `yaml:"trust-pause,omitempty"`
		Remote     string `yaml:"remote,omitempty"`
		Local      string `yaml:"local,omitempty"`
		VNI        int    `yaml:"vni,omitempty"`
	}
	type sw struct {
		Name  string `yaml:"name"`
		Ports int    `yaml:"ports"`
		Port  []port `yaml:"port,omitempty"`
	}
	type link struct {
		A string `yaml:"a"`
		B string `yaml:"b"`
	}
	type conf struct {
		RunDir   string `yaml:"run-dir"`
		Pcap     string `yaml:"pcap,omitempty"`
		Switches []sw   `yaml:"switches"`
		Links    []link `yaml:"links,omitempty"`
		Metrics  string `yaml:"metrics,omitempty"`
	}
	c := conf{RunDir: filepath.Join(r.RunDir, DirFabric)}
	c.Metrics, _, _ = MetricsAddrs(r)
	if r.Pcap {
		c.Pcap = filepath.Join(r.RunDir, DirPcap)
	}
	for _, s := range r.Switches {
		x := sw{Name: s.Name, Ports: s.Ports}
		for _, g := range r.Guests {
			if g.Switch != s.Name {
				continue
			}
			kind := fabric.KindQEMUStream
			if g.NIC == NICHicain {
				kind = fabric.KindSeqpacket
			}
			// A hicain guest's frames pass its vNIC's filter first
			// (DeviceArgs); the seqpacket port trusts the backend.
			pc := port{Num: g.Port, Kind: kind, TrustPause: g.TrustPause && kind == fabric.KindQEMUStream}
			if kind == fabric.KindQEMUStream {
				pc.Dial = StreamSocket(r, g)
			}
			if g.Link == LinkIB {
				pc.Link = fabric.LinkIB
			}
			x.Port = append(x.Port, pc)
		}
		// The inter-switch links of an InfiniBand switch are
		// InfiniBand links.
		if r.SwitchLink(s.Name) == LinkIB {
			for _, l := range r.Links {
				if l.remote() {
					continue // below
				}
				for _, end := range []string{l.A, l.B} {
					sw, num, _ := strings.Cut(end, ":")
					if n, err := strconv.Atoi(num); err == nil && sw == s.Name {
						x.Port = append(x.Port, port{Num: n, Link: fabric.LinkIB})
					}
				}
			}
		}
		for _, l := range r.Links {
			if n, ok := l.remotePort(s.Name); ok {
				pc := port{Num: n, Kind: fabric.KindVXLAN, Remote: l.Remote, Local: l.Local, VNI: l.VNI}
				if r.SwitchLink(s.Name) == LinkIB {
					pc.Link = fabric.LinkIB
				}
				x.Port = append(x.Port, pc)
			}
		}
		c.Switches = append(c.Switches, x)
	}
	for _, l := range r.Links {
		if !l.remote() {
			c.Links = append(c.Links, link{A: l.A, B: l.B})
		}
	}
	b, _ := yaml.Marshal(map[string]any{"fabric": c})
	return append([]byte("# Written by hinic deploy rack.\n"), b...)
}

// StreamSocket is the socket of an rxe guest's data NIC: its QEMU's
// -netdev stream,server=on listens there and the guest's switch port
// dials it. It sits beside the port's own socket path, which a dialling
// port does not use.
func StreamSocket(r *Rack, g Guest) string {
	return filepath.Join(r.RunDir, DirFabric, fmt.Sprintf("%s-port%d.qemu.sock", g.Switch, g.Port))
}

// PortSocket is the socket path of a switch port in the fabric run dir.
func PortSocket(r *Rack, sw string, port int) string {
	return filepath.Join(r.RunDir, DirFabric, fmt.Sprintf("%s-port%d.sock", sw, port))
}

// QEMUArgs is the QEMU command line of guest g: the management NIC on
// user networking first, then the data NIC: a virtio-net NIC on the
// fabric for rxe, the HiNIC ivshmem function for hicain; then one
// ivshmem function per GPU. With a hicain NIC or GPUs the guest's RAM
// is a shared file the backends map.
func QEMUArgs(r *Rack, g Guest, m *image.Manifest, imageDir, dir, accel, pubkey string) []string {
	n := 0
	for i := range r.Guests {
		if r.Guests[i].Name == g.Name {
			n = i + 1
		}
	}
	data := []string{"-machine", string(QEMUMachine)}
	if sharedRAM(g) {
		data = ramQEMUArgs(r, g)
	}
	if g.NIC == NICHicain {
		data = append(data, hicainQEMUArgs(r, g)...)
	} else {
		data = append(data,
			"-netdev", "stream,id=data,server=on,addr.type=unix,addr.path="+StreamSocket(r, g),
			"-device", "virtio-net-pci,netdev=data,mac="+g.MAC)
	}
	data = append(data, gpuQEMUArgs(r, g)...)
	args := []string{
		"-name", g.Name, "-accel", accel,
		"-m", strconv.Itoa(g.Memory), "-smp", strconv.Itoa(g.CPUs),
		"-kernel", filepath.Join(imageDir, image.FileKernel),
		"-initrd", filepath.Join(imageDir, image.FileInitrd),
		"-append", m.Cmdline + " systemd.hostname=" + g.Name,
		"-drive", "file=" + filepath.Join(dir, "disk.qcow2") + ",if=virtio,format=qcow2",
		"-netdev", fmt.Sprintf("user,id=mgmt,hostfwd=tcp:127.0.0.1:%d-:22", g.SSHPort),
		"-device", fmt.Sprintf("virtio-net-pci,netdev=mgmt,mac=52:54:00:12:00:%02x", n),
	}
	args = append(args, data...)
	return append(args,
		"-smbios", "type=11,value=io.systemd.credential:ssh.authorized_keys.root="+strings.ReplaceAll(pubkey, ",", ",,"),
		"-display", "none", "-serial", "file:"+filepath.Join(dir, "console.log"),
		"-monitor", "none", "-qmp", "unix:"+QMPSocket(dir)+",server=on,wait=off", "-no-reboot",
		"-pidfile", filepath.Join(dir, "qemu.pid"),
	)
}

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
	if running && ((g.NIC == NICHicain && st.deviceFresh) || (g.GPUs.Count > 0 && st.gpuFresh)) {
		p("%s: booting again: a device backend was restarted", g.Name)
		if err := stop(gs.PID, qemuProc(gs.Dir), g.Name, p); err != nil {
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
		logf, err := openPrivate(filepath.Join(gs.Dir, "qemu.log"), os.O_APPEND)
		if err != nil {
			return err
		}
		args := QEMUArgs(r, g, m, imageDir, gs.Dir, gs.Accel, pub)
		fmt.Fprintf(logf, "$ qemu-system-x86_64 %s\n", strings.Join(args, " "))
		cmd := exec.Command("qemu-system-x86_64", args...)
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
	}
	wctx, cancel := context.WithTimeout(ctx, r.BootTimeout.Duration)
	defer cancel()
	c, err := WaitSSH(wctx, gs.SSHAddr, signer, filepath.Join(r.RunDir, FileKnownHosts))
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
	var errs []error
	for i := range st.Guests {
		g := &st.Guests[i]
		if g.PID == 0 {
			// A deploy interrupted before it saved the state: QEMU's
			// own pid file still names the process.
			if b, err := os.ReadFile(filepath.Join(g.Dir, "qemu.pid")); err == nil {
				g.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
		}
		if err := stop(g.PID, qemuProc(g.Dir), g.Name, p); err != nil {
			errs = append(errs, err)
		}
	}
	if st.DevicePID == 0 {
		if b, err := os.ReadFile(filepath.Join(runDir, FileDevicePID)); err == nil {
			st.DevicePID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if st.DevicePID != 0 || len(st.Rack.hicainGuests()) > 0 {
		if err := stop(st.DevicePID, deviceProc(&st.Rack, st.DeviceExe), "device", p); err != nil {
			errs = append(errs, err)
		}
	}
	if st.GPUPID == 0 {
		if b, err := os.ReadFile(filepath.Join(runDir, FileGPUPID)); err == nil {
			st.GPUPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if st.GPUPID != 0 || len(st.Rack.gpuGuests()) > 0 {
		if err := stop(st.GPUPID, gpuProc(&st.Rack, st.GPUExe), "gpu", p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := stop(st.FabricPID, fabricProc(&st.Rack, st.FabricExe), "fabric", p); err != nil {
		errs = append(errs, err)
	}
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

// GuestStatus is one guest line of Status.
type GuestStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"` // running, stopped, crashed, unreachable
	PID       int    `json:"pid"`
	SSH       string `json:"ssh"`
	DataIP    string `json:"data_ip"`
	NIC       string `json:"nic"`
	RDMADev   string `json:"rdma_dev"`
	Link      string `json:"link"`  // eth or ib
	Accel     string `json:"accel"` // tcg or kvm
	PortState string `json:"port_state"`
	LID       string `json:"lid,omitempty"` // an InfiniBand port's LID, e.g. 0x3`
	Error     string `json:"error,omitempty"`
}

// RackStatus is what `hinic deploy status` shows.
type RackStatus struct {
	Name   string `json:"name"`
	RunDir string `json:"run_dir"`
	Down   bool   `json:"down"`
	Fabric string `json:"fabric"` // running or stopped
	// Device is the device backend's state (running or stopped) in a
	// rack with hicain guests, else empty; VNICs is its status.
	Device string              `json:"device,omitempty"`
	VNICs  []device.VNICStatus `json:"vnics,omitempty"`
	// GPU is the GPU backend's state (running or stopped) in a rack
	// with GPUs, else empty; GPUs are every guest's GPUs with the
	// backend's view of each.
	GPU      string         `json:"gpu,omitempty"`
	GPUs     []GPUInfo      `json:"gpus,omitempty"`
	Guests   []GuestStatus  `json:"guests"`
	Switches *fabric.Status `json:"switches,omitempty"`
}

// Status looks at each process of the rack, asks each running guest for
// its RDMA port state over SSH, and queries the fabric and the device
// and GPU backends.
func Status(ctx context.Context, runDir string) (*RackStatus, error) {
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	rs := &RackStatus{Name: st.Rack.Name, RunDir: st.Rack.RunDir, Down: st.Down, Fabric: "stopped"}
	if alive(st.FabricPID, fabricProc(&st.Rack, st.FabricExe)) {
		rs.Fabric = "running"
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs.Switches, _ = fabric.QueryStatus(qctx, filepath.Join(st.Rack.RunDir, DirFabric))
		cancel()
	}
	if len(st.Rack.hicainGuests()) > 0 {
		rs.Device = "stopped"
		if alive(st.DevicePID, deviceProc(&st.Rack, st.DeviceExe)) {
			rs.Device = "running"
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if ds, err := device.QueryStatus(qctx, DeviceControl(&st.Rack)); err == nil {
				rs.VNICs = ds.VNICs
			}
			cancel()
		}
	}
	if len(st.Rack.gpuGuests()) > 0 {
		rs.GPU = "stopped"
		var gst *gpu.Status
		if alive(st.GPUPID, gpuProc(&st.Rack, st.GPUExe)) {
			rs.GPU = "running"
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if s, err := gpu.QueryStatus(qctx, GPUControl(&st.Rack)); err == nil {
				gst = &s
			}
			cancel()
		}
		rs.GPUs = gpuInfos(&st.Rack, gst, rs.GPU)
	}
	rs.Guests = make([]GuestStatus, len(st.Guests))
	var wg sync.WaitGroup
	for i := range st.Guests {
		g := &st.Guests[i]
		gs := &rs.Guests[i]
		*gs = GuestStatus{Name: g.Name, PID: g.PID, SSH: g.SSHAddr, DataIP: g.DataIP, NIC: g.NIC, RDMADev: g.RDMADev, Link: g.Link,
			Accel: g.Accel, State: "stopped"}
		if !alive(g.PID, qemuProc(g.Dir)) {
			if !st.Down {
				gs.State = "crashed"
				if b, err := os.ReadFile(filepath.Join(g.Dir, "qemu.log")); err == nil {
					gs.Error = lastLines(string(b), 1)
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			c, err := st.Connect(cctx, g)
			if err != nil {
				gs.State, gs.Error = "unreachable", err.Error()
				return
			}
			defer c.Close()
			gs.State = "running"
			if g.RDMADev != "" {
				port := "/sys/class/infiniband/" + g.RDMADev + "/ports/1/"
				out, err := c.Run(cctx, "cat "+port+"state")
				if err != nil {
					gs.PortState = "absent"
				} else {
					f := strings.Fields(out)
					gs.PortState = f[len(f)-1]
				}
				if g.Link == LinkIB {
					if out, err := c.Run(cctx, "cat "+port+"lid"); err == nil {
						gs.LID = strings.TrimSpace(out)
					}
				}
			}
		}()
	}
	wg.Wait()
	return rs, nil
}

// WriteLog copies a guest file's tail (e.g. its console) to w.
func WriteLog(w io.Writer, path string, lines int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, lastLines(string(b), lines)+"\n")
	return err
}
