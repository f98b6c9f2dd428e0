package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
)

// The GPUs of a rack: one `hinic gpu serve` for every guest's HiGPU
// functions, each an ivshmem-doorbell function whose DMA reaches the
// guest's RAM file (the same memory-backend-file a hicain guest's vNIC
// uses).
const (
	FileGPULog = "gpu.log"
	FileGPUPID = "gpu.pid"
	FileGPUCtl = "gpu.sock" // the GPU backend's control socket
	// MaxGuestGPUs bounds a guest's GPUs: the gpu_ids the device ABI
	// gives (each names its own device address range).
	MaxGuestGPUs = gpu.MaxGPUs
	// DefaultGPUMemory is a GPU's device memory, in MiB, when the spec
	// gives none.
	DefaultGPUMemory = 256
	// MinGPUMemory and MaxGPUMemory bound it: hicart_test needs room
	// for its allocations and the gate's hicart-bandwidth run for two
	// 8 MiB buffers, and the backend keeps device memory in a
	// sparse memfd, so a large one costs only what the guest touches.
	MinGPUMemory = 32
	MaxGPUMemory = 64 << 10
	// gpuVectors is the ivshmem vectors of a GPU function (QEMU's
	// vectors= and the backend's).
	gpuVectors = 4
	// higpuDriver is the guest's GPU driver (shipped in the modules
	// package with hicain_net and hicain_ib).
	higpuDriver = "higpu"
)

// defaults checks a guest's gpus: and fills in the memory and the ids.
func (c *GPUs) defaults() error {
	if c.Count < 0 || c.Count > MaxGuestGPUs {
		return fmt.Errorf("count %d: want 0 to %d", c.Count, MaxGuestGPUs)
	}
	if c.Count == 0 {
		if len(c.IDs) > 0 || c.Memory != 0 {
			return fmt.Errorf("ids or memory given with count 0: set count")
		}
		c.IDs = nil
		return nil
	}
	if c.Memory == 0 {
		c.Memory = DefaultGPUMemory
	}
	if c.Memory < MinGPUMemory || c.Memory > MaxGPUMemory {
		return fmt.Errorf("memory %d MiB: want %d to %d MiB per GPU", c.Memory, MinGPUMemory, MaxGPUMemory)
	}
	if len(c.IDs) == 0 {
		for i := range c.Count {
			c.IDs = append(c.IDs, i)
		}
		return nil
	}
	if len(c.IDs) != c.Count {
		return fmt.Errorf("%d ids %v for count %d: give one id per GPU, or none for 0 to %d", len(c.IDs), c.IDs, c.Count, c.Count-1)
	}
	seen := map[int]bool{}
	for _, id := range c.IDs {
		if id < 0 || id >= MaxGuestGPUs {
			return fmt.Errorf("id %d: want 0 to %d", id, MaxGuestGPUs-1)
		}
		if seen[id] {
			return fmt.Errorf("id %d given twice", id)
		}
		seen[id] = true
	}
	return nil
}

// gpuGuests returns the guests of the rack with GPUs.
func (r *Rack) gpuGuests() []Guest {
	return r.guestsWhere(func(g Guest) bool { return g.GPUs.Count > 0 })
}

// gpuCount is the number of GPUs of the rack.
func (r *Rack) gpuCount() int {
	n := 0
	for _, g := range r.Guests {
		n += g.GPUs.Count
	}
	return n
}

// ramGuests returns the guests whose RAM is a shared file that a backend
// maps: those with a hicain vNIC or GPUs.
func (r *Rack) ramGuests() []Guest {
	return r.guestsWhere(sharedRAM)
}

// sharedRAM reports whether guest g's RAM is a file shared with a
// backend.
func sharedRAM(g Guest) bool { return g.NIC == NICHicain || g.GPUs.Count > 0 }

// GPUSocket is the ivshmem socket of GPU id of guest g: the GPU backend
// listens, QEMU connects.
func GPUSocket(r *Rack, g Guest, id int) string {
	return filepath.Join(GuestDir(r, g.Name), fmt.Sprintf("gpu%d.sock", id))
}

// GPUControl is the control socket of the rack's GPU backend.
func GPUControl(r *Rack) string { return filepath.Join(r.RunDir, FileGPUCtl) }

// gpuProc is the rack's `hinic gpu serve --control RUN/gpu.sock`, run by
// exe (State.GPUExe).
func gpuProc(r *Rack, exe string) proc {
	return hinicProc(exe, "gpu", "serve", "--control", GPUControl(r))
}

// GPUArgs is the `hinic gpu serve` command line (after the binary) of
// the rack: one --gpu per GPU of every guest, on the guest's RAM file,
// its device memory in an anonymous memfd, and its port on the rack's
// HiLink switch (named guest/gpu<id> there) unless it has none.
func GPUArgs(r *Rack) []string {
	args := []string{"gpu", "serve", "--control", GPUControl(r)}
	if _, _, m := MetricsAddrs(r); m != "" {
		args = append(args, "--metrics", m)
	}
	for _, g := range r.gpuGuests() {
		for _, id := range g.GPUs.IDs {
			opts := []string{
				"socket=" + GPUSocket(r, g, id),
				"ram=" + GuestRAM(r, g),
				fmt.Sprintf("ram-size=%dM", g.Memory),
				"machine=" + string(QEMUMachine),
				fmt.Sprintf("id=%d", id),
				fmt.Sprintf("mem-size=%dM", g.GPUs.Memory),
				fmt.Sprintf("vectors=%d", gpuVectors),
			}
			if port := HiLinkPort(r, g, id); port != "" {
				opts = append(opts, "hilink="+port, fmt.Sprintf("link-name=%s/gpu%d", g.Name, id))
			}
			args = append(args, "--gpu", strings.Join(opts, ","))
		}
	}
	return args
}

// startGPU starts the rack's GPU backend, or keeps the one running if it
// serves exactly these GPUs. It reports whether it started a new one:
// the guests with GPUs then need a new QEMU, which reads the ivshmem
// setup only at start-up.
func startGPU(ctx context.Context, st *State, hinic string, p Progress) (bool, error) {
	r := &st.Rack
	args := GPUArgs(r)
	logPath := filepath.Join(r.RunDir, FileGPULog)
	if alive(st.GPUPID, gpuProc(r, st.GPUExe)) {
		// A HiLink switch started afresh is no reason: the backend's
		// GPU ports dial their switch again (docs/gpu.md).
		why := gpuReusable(ctx, st.GPUPID, args, GPUControl(r), r.gpuCount())
		if why == "" {
			p("gpu: already running (pid %d)", st.GPUPID)
			return false, nil
		}
		p("gpu: restarting the backend (pid %d): %s", st.GPUPID, why)
		if err := stop(st.GPUPID, gpuProc(r, st.GPUExe), "gpu", p); err != nil {
			return false, err
		}
	}
	for _, g := range r.gpuGuests() {
		if err := ensureGuestDir(GuestDir(r, g.Name)); err != nil {
			return false, err
		}
	}
	// The control socket listens once every GPU has its RAM mapped and
	// its ivshmem socket listening.
	pid, exe, err := r.spawn(ctx, hinic, daemon{what: "GPU backend", args: args, logPath: logPath,
		pidPath: filepath.Join(r.RunDir, FileGPUPID), ready: func() bool {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := gpu.QueryStatus(qctx, GPUControl(r))
			return err == nil
		}})
	if pid != 0 {
		st.GPUPID, st.GPUExe = pid, exe
	}
	if err != nil {
		return pid != 0, err
	}
	var gs []string
	for _, g := range r.gpuGuests() {
		gs = append(gs, fmt.Sprintf("%s %d x %d MiB", g.Name, g.GPUs.Count, g.GPUs.Memory))
	}
	p("gpu: serving %s (pid %d, log %s)", strings.Join(gs, ", "), st.GPUPID, logPath)
	return true, nil
}

// gpuReusable returns why the running GPU backend pid cannot serve the
// rack, or "" when it can: same command line, control socket answering
// with every GPU.
func gpuReusable(ctx context.Context, pid int, args []string, control string, n int) string {
	if why := sameCmdline(pid, args, "the rack's GPUs changed"); why != "" {
		return why
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := gpu.QueryStatus(qctx, control)
	if err != nil {
		return err.Error()
	}
	if len(s.GPUs) != n {
		return fmt.Sprintf("it serves %d GPUs, not %d", len(s.GPUs), n)
	}
	return ""
}

// sameCmdline returns why process pid's arguments are not args (changed
// when they differ), or "".
func sameCmdline(pid int, args []string, changed string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return err.Error()
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	if len(got) < 1 || !slices.Equal(got[1:], args) {
		return changed
	}
	return ""
}

// gpuFreeTimeout bounds the wait for the GPU backend to notice that a
// guest's previous QEMU is gone.
const gpuFreeTimeout = 10 * time.Second

// waitGPUsFree waits, up to timeout, until the GPU backend serves every
// GPU of guest g with no QEMU attached. The backend takes one guest per
// GPU and refuses a second: a QEMU stopped a moment ago may not have been
// noticed yet, and a QEMU started meanwhile would boot without its GPU.
func waitGPUsFree(ctx context.Context, r *Rack, g Guest, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := gpu.QueryStatus(qctx, GPUControl(r))
		cancel()
		var busy []string
		if err == nil {
			for _, gi := range gpuInfos(r, &s, "running") {
				if gi.Guest == g.Name && gi.State != "waiting" {
					busy = append(busy, fmt.Sprintf("gpu_id %d is %s", gi.ID, gi.State))
				}
			}
			if len(busy) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("the GPU backend still has a guest on its GPUs (%s): is another QEMU attached to %s? (hinic gpu status --control %s)",
				strings.Join(busy, ", "), filepath.Dir(GPUSocket(r, g, 0)), GPUControl(r))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// setupGPUs loads higpu in guest g and waits until it has bound every
// GPU (/dev/higpu<id>), then checks that the HiGPU runtime and tools are
// installed. The modules package's modules-load.d loads higpu at boot;
// the modprobe covers an image made before it did.
func setupGPUs(ctx context.Context, c *Client, g Guest, p Progress) error {
	if out, err := c.Run(ctx, "modprobe "+higpuDriver+" || { echo \"(guest kernel $(uname -r))\"; exit 1; }"); err != nil {
		return fmt.Errorf("modprobe %s failed: %s\n%s", higpuDriver, strings.TrimSpace(out), missingHicain)
	}
	var devs []string
	for _, id := range g.GPUs.IDs {
		devs = append(devs, fmt.Sprintf("/dev/higpu%d", id))
	}
	var out string
	var err error
	for i := 0; ; i++ {
		out, err = c.Run(ctx, "udevadm settle -t 5 >/dev/null 2>&1; for d in "+strings.Join(devs, " ")+
			"; do [ -c $d ] || echo missing $d; done; ls /dev | grep '^higpu' | tr '\\n' ' '; true")
		if err == nil && !strings.Contains(out, "missing") {
			break
		}
		if i == 30 {
			return fmt.Errorf("%s bound no %s in 30 s (the guest has %q; is the GPU function there? lspci -nn | grep 1af4:1110)",
				higpuDriver, strings.Join(devs, ", "), strings.TrimSpace(lastLines(out, 1)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if _, err := c.Run(ctx, "command -v hicart-smi hicart-bandwidth hicart_test >/dev/null && ldconfig -p | grep -q libhicart.so.1"); err != nil {
		return errors.New("the HiGPU runtime or tools are not installed (libhicart1, hicart-tools)\n" + missingHicart)
	}
	p("%s: %d GPU(s) bound: %s", g.Name, len(devs), strings.Join(devs, " "))
	return nil
}

const missingHicart = "The image needs the HiGPU runtime and tools: build them with " +
	"hinic pkg build --only libhicart1,hicart-tools, then the image with " +
	"hinic image build --deb <libhicart1 .deb> --deb <hicart-tools .deb> (beside the hicain ones), " +
	"or list both .deb files under the guest's debs: in the rack spec."

// GPUInfo is one GPU of a deployed rack as `deploy status` shows it:
// what the spec gives and what the backend says.
type GPUInfo struct {
	Guest     string `json:"guest"`
	ID        int    `json:"gpu_id"`
	MemoryMiB int    `json:"memory_mib"`
	// State is the backend's: waiting (no QEMU attached), ready (the
	// guest driver has not set the device live), live, fatal; absent
	// when the backend does not serve it, stopped when it is not
	// running.
	State    string  `json:"state"`
	MemUsed  uint64  `json:"mem_used"`
	Contexts int     `json:"contexts"`
	Util     float64 `json:"utilization"`
	Fatal    uint32  `json:"fatal_code,omitempty"`
}

// gpuInfos lines up the rack's GPUs with the backend's status (nil when
// it could not be read), by ivshmem socket.
func gpuInfos(r *Rack, s *gpu.Status, backend string) []GPUInfo {
	by := map[string]gpu.GPUStatus{}
	if s != nil {
		for _, x := range s.GPUs {
			by[x.Socket] = x
		}
	}
	var out []GPUInfo
	for _, g := range r.gpuGuests() {
		for _, id := range g.GPUs.IDs {
			gi := GPUInfo{Guest: g.Name, ID: id, MemoryMiB: g.GPUs.Memory, State: "stopped"}
			if backend == "running" {
				gi.State = "absent"
				if x, ok := by[GPUSocket(r, g, id)]; ok {
					gi.State, gi.MemUsed, gi.Contexts, gi.Util, gi.Fatal = x.State, x.MemUsed, x.Contexts, x.Util, x.FatalCode
				}
			}
			out = append(out, gi)
		}
	}
	return out
}
