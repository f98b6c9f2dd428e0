package deploy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/hilink"
)

// HiLink in a rack (docs/deploy.md, "HiLink"): every HiSwitch is the TOR
// of one ORv3 rack, and the slot under it holds the rack's HiLink
// switch, one `hinic link serve`. The GPUs of the rack's guests cable
// to it, one HiLink port each, and reach each other's device memory
// through it. HiLink is rack-local: the spec cannot put GPUs of two
// racks on one HiLink switch, nor cable two HiLink switches together;
// GPU traffic between racks goes over RoCEv2 through the TORs.

// HiLinkNone, as a guest's gpus.hilink, gives its GPUs no HiLink port.
const HiLinkNone = "none"

// Files of a HiLink switch in the run directory.
const (
	// DirHiLink holds one directory per HiLink switch, its port and
	// control sockets (hinic link serve --run-dir).
	DirHiLink = "hilink"
	// hilinkNamePrefix names a rack's HiLink switch when the spec
	// does not: hl-<switch>.
	hilinkNamePrefix = "hl-"
)

// HiLinkSwitch is the HiLink switch of one rack (Switch.HiLink).
type HiLinkSwitch struct {
	// Name is unique among the rack's HiSwitches and HiLink switches
	// (default hl-<switch>).
	Name string `yaml:"name" json:"name"`
	// Ports is its port count, ports 0 to Ports-1 (default
	// hilink.DefaultPorts, at most hilink.MaxPorts).
	Ports int `yaml:"ports" json:"ports"`
}

// HiLinkInfo is one HiLink switch of a deployed rack as `deploy status`
// shows it.
type HiLinkInfo struct {
	Name  string `json:"name"`
	Rack  string `json:"rack"`  // the HiSwitch (TOR) of its rack
	State string `json:"state"` // running or stopped
	PID   int    `json:"pid,omitempty"`
	// Ports are the switch's own status of each port, when it answers.
	Ports []hilink.PortStatus `json:"ports,omitempty"`
}

// hilinkDefaults names every rack's HiLink switch and cables the GPUs:
// each guest's GPUs to the HiLink switch of its rack unless it says
// none, each on its own port, gpu_ids unique on a switch (it forwards by
// gpu_id). A HiLink switch of another rack or a link naming one is
// refused: HiLink is rack-local.
func (r *Rack) hilinkDefaults() error {
	names := map[string]string{} // every switch name: what it is
	for _, s := range r.Switches {
		names[s.Name] = "HiSwitch"
	}
	for i := range r.Switches {
		s := &r.Switches[i]
		key := func(k string) string { return fmt.Sprintf("switches[%d].hilink.%s", i, k) }
		if s.HiLink.Name == "" {
			s.HiLink.Name = hilinkNamePrefix + s.Name
		}
		if s.HiLink.Name == HiLinkNone || strings.ContainsAny(s.HiLink.Name, "/: ") {
			return r.src.errAt(key("name"), "HiLink switch name %q: %q, or has '/', ':' or a space", s.HiLink.Name, HiLinkNone)
		}
		if what, ok := names[s.HiLink.Name]; ok {
			return r.src.errAt(key("name"), "%q already names a %s: give rack %s's HiLink switch its own name", s.HiLink.Name, what, s.Name)
		}
		names[s.HiLink.Name] = "HiLink switch"
		if s.HiLink.Ports == 0 {
			s.HiLink.Ports = hilink.DefaultPorts
		}
		if s.HiLink.Ports < 1 || s.HiLink.Ports > hilink.MaxPorts {
			return r.src.errAt(key("ports"), "%d: want 1 to %d (HiLink ports 0 to N-1)", s.HiLink.Ports, hilink.MaxPorts)
		}
	}
	ports := map[string]map[int]string{} // HiLink switch: port: guest
	ids := map[string]map[int]string{}   // HiLink switch: gpu_id: guest
	for i := range r.Guests {
		g := &r.Guests[i]
		c := &g.GPUs
		key := func(k string) string { return fmt.Sprintf("guests[%d].gpus.%s", i, k) }
		if c.Count == 0 {
			if c.HiLink != "" || len(c.HiLinkPorts) > 0 {
				return r.src.errAt(key("hilink"), "guest %s: hilink or hilink-ports given without GPUs: set count", g.Name)
			}
			continue
		}
		if c.HiLink == "" {
			c.HiLink = r.switchByName(g.Switch).HiLink.Name
		}
		if c.HiLink == HiLinkNone {
			if len(c.HiLinkPorts) > 0 {
				return r.src.errAt(key("hilink-ports"), "guest %s: hilink-ports with hilink: none", g.Name)
			}
			continue
		}
		home := r.hilinkRack(c.HiLink)
		switch {
		case home == nil:
			return r.src.errAt(key("hilink"), "guest %s: no HiLink switch %q (the racks': %s; or %s)", g.Name, c.HiLink,
				strings.Join(r.hilinkNames(), ", "), HiLinkNone)
		case home.Name != g.Switch:
			return r.src.errAt(key("hilink"), "guest %s is in rack %s (switch %s) but %s is the HiLink switch of rack %s: "+
				"HiLink is rack-local, GPUs of two racks reach each other over RoCEv2 through the TORs", g.Name, g.Switch, g.Switch, c.HiLink, home.Name)
		}
		if ports[c.HiLink] == nil {
			ports[c.HiLink], ids[c.HiLink] = map[int]string{}, map[int]string{}
		}
		taken, byID := ports[c.HiLink], ids[c.HiLink]
		if len(c.HiLinkPorts) == 0 {
			for range c.Count {
				p := 0
				for taken[p] != "" || slices.Contains(c.HiLinkPorts, p) {
					p++
				}
				c.HiLinkPorts = append(c.HiLinkPorts, p)
			}
		} else if len(c.HiLinkPorts) != c.Count {
			return r.src.errAt(key("hilink-ports"), "guest %s: %d ports %v for %d GPUs: give one port per GPU, or none for the next free ones",
				g.Name, len(c.HiLinkPorts), c.HiLinkPorts, c.Count)
		}
		for j, p := range c.HiLinkPorts {
			if p < 0 || p >= home.HiLink.Ports {
				return r.src.errAt(key("hilink-ports"), "guest %s: port %d of HiLink switch %s is out of range 0..%d",
					g.Name, p, c.HiLink, home.HiLink.Ports-1)
			}
			if other := taken[p]; other != "" {
				return r.src.errAt(key("hilink-ports"), "guest %s: port %d of HiLink switch %s is already %s's: one GPU per port",
					g.Name, p, c.HiLink, other)
			}
			taken[p] = fmt.Sprintf("%s gpu_id %d", g.Name, c.IDs[j])
			if other := byID[c.IDs[j]]; other != "" {
				return r.src.errAt(key("ids"), "guest %s: gpu_id %d is %s's too, and HiLink switch %s forwards by gpu_id: "+
					"give the GPUs of one rack distinct ids", g.Name, c.IDs[j], other, c.HiLink)
			}
			byID[c.IDs[j]] = g.Name
		}
	}
	for i, l := range r.Links {
		for _, end := range []struct{ k, v string }{{"a", l.A}, {"b", l.B}} {
			if sw := r.linkSwitch(end.v); end.v != "" && r.hilinkRack(sw) != nil {
				return r.src.errAt(fmt.Sprintf("links[%d].%s", i, end.k), "%s is a HiLink switch: HiLink is rack-local and takes no cable; "+
					"GPUs of two racks reach each other over RoCEv2 through the TORs' link", end.v)
			}
		}
	}
	return nil
}

// hilinkRack returns the HiSwitch whose rack HiLink switch name is, or
// nil.
func (r *Rack) hilinkRack(name string) *Switch {
	for i := range r.Switches {
		if r.Switches[i].HiLink.Name == name {
			return &r.Switches[i]
		}
	}
	return nil
}

// hilinkNames are the names of the racks' HiLink switches.
func (r *Rack) hilinkNames() []string {
	var out []string
	for _, s := range r.Switches {
		out = append(out, s.HiLink.Name)
	}
	return out
}

// HiLinkSwitches are the HiLink switches that run: those a GPU cables
// to, in the order of their racks.
func HiLinkSwitches(r *Rack) []Switch {
	var out []Switch
	for _, s := range r.Switches {
		for _, g := range r.Guests {
			if g.GPUs.Count > 0 && g.GPUs.HiLink == s.HiLink.Name {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// HiLinkDir is the run directory of HiLink switch name: its port
// sockets and its control socket.
func HiLinkDir(r *Rack, name string) string { return filepath.Join(r.RunDir, DirHiLink, name) }

// HiLinkControl is the control socket of HiLink switch name.
func HiLinkControl(r *Rack, name string) string {
	return filepath.Join(HiLinkDir(r, name), hilink.ControlSocketName)
}

// HiLinkPort is the socket of GPU id of guest g on its HiLink switch,
// or "" when it has none.
func HiLinkPort(r *Rack, g Guest, id int) string {
	i := slices.Index(g.GPUs.IDs, id)
	if g.GPUs.HiLink == "" || g.GPUs.HiLink == HiLinkNone || i < 0 || i >= len(g.GPUs.HiLinkPorts) {
		return ""
	}
	return hilink.PortPath(HiLinkDir(r, g.GPUs.HiLink), g.GPUs.HiLinkPorts[i])
}

// hilinkLog and hilinkPIDFile are HiLink switch name's log and pid file.
func hilinkLog(r *Rack, name string) string {
	return filepath.Join(r.RunDir, "hilink-"+name+".log")
}

func hilinkPIDFile(runDir, name string) string {
	return filepath.Join(runDir, "hilink-"+name+".pid")
}

// LinkArgs is the `hinic link serve` command line (after the binary) of
// the rack's HiLink switch sw.
func LinkArgs(r *Rack, sw Switch) []string {
	args := []string{"link", "serve", "--run-dir", HiLinkDir(r, sw.HiLink.Name), "--ports", strconv.Itoa(sw.HiLink.Ports)}
	if r.Pcap {
		args = append(args, "--pcap", filepath.Join(r.RunDir, DirPcap, DirHiLink+"-"+sw.HiLink.Name))
	}
	return args
}

// hilinkProc is HiLink switch name, run by exe (State.HiLinkExe).
func hilinkProc(r *Rack, name, exe string) proc {
	return hinicProc(exe, "link", "serve", "--run-dir", HiLinkDir(r, name))
}

// startHiLinks starts the rack's HiLink switches, keeping one that runs
// with the same command line, and stops those the rack no longer has.
// It reports whether it started one; a running GPU backend's ports dial
// a switch started afresh again.
func startHiLinks(ctx context.Context, st *State, hinic string, p Progress) (bool, error) {
	r := &st.Rack
	want := HiLinkSwitches(r)
	if err := stopHiLinks(st, func(name string) bool {
		return !slices.ContainsFunc(want, func(s Switch) bool { return s.HiLink.Name == name })
	}, p); err != nil {
		return false, err
	}
	fresh := false
	for _, sw := range want {
		name := sw.HiLink.Name
		args := LinkArgs(r, sw)
		pid := st.HiLinkPIDs[name]
		if alive(pid, hilinkProc(r, name, st.HiLinkExe)) {
			why := sameCmdline(pid, args, "its ports changed")
			if why == "" {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := hilink.QueryStatus(qctx, HiLinkControl(r, name))
				cancel()
				if err == nil {
					p("hilink %s: already running (pid %d)", name, pid)
					continue
				}
				why = err.Error()
			}
			p("hilink %s: restarting (pid %d): %s", name, pid, why)
			if err := stop(pid, hilinkProc(r, name, st.HiLinkExe), "hilink "+name, p); err != nil {
				return fresh, err
			}
		}
		if r.Pcap {
			if err := ensureGuestDir(filepath.Join(r.RunDir, DirPcap)); err != nil {
				return fresh, err
			}
		}
		pid, exe, err := r.spawn(ctx, hinic, daemon{what: "HiLink switch " + name, args: args,
			logPath: hilinkLog(r, name), pidPath: hilinkPIDFile(r.RunDir, name), ready: func() bool {
				// The control socket is created last: every port listens.
				_, err := os.Stat(HiLinkControl(r, name))
				return err == nil
			}})
		if pid != 0 {
			if st.HiLinkPIDs == nil {
				st.HiLinkPIDs = map[string]int{}
			}
			st.HiLinkPIDs[name], st.HiLinkExe = pid, exe
			fresh = true
		}
		if err != nil {
			return fresh, err
		}
		p("hilink %s: rack %s's HiLink switch, %d ports in %s (pid %d, log %s)", name, sw.Name, sw.HiLink.Ports,
			HiLinkDir(r, name), pid, hilinkLog(r, name))
	}
	return fresh, nil
}

// stopHiLinks stops the HiLink switches of the state for which drop is
// true, their pid from the state or else from their pid file.
func stopHiLinks(st *State, drop func(name string) bool, p Progress) error {
	r := &st.Rack
	names := map[string]bool{}
	for name := range st.HiLinkPIDs {
		names[name] = true
	}
	for _, s := range HiLinkSwitches(r) {
		names[s.HiLink.Name] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if !drop(name) {
			continue
		}
		pid := st.HiLinkPIDs[name]
		if pid == 0 {
			pid = readPIDFile(hilinkPIDFile(r.RunDir, name))
		}
		if err := stop(pid, hilinkProc(r, name, st.HiLinkExe), "hilink "+name, p); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(st.HiLinkPIDs, name)
	}
	if len(errs) > 0 {
		return fmt.Errorf("deploy: %v", errs)
	}
	return nil
}

// HiLinkInfos are the rack's HiLink switches with their processes'
// state and, when running, their ports.
func HiLinkInfos(ctx context.Context, st *State) []HiLinkInfo {
	r := &st.Rack
	var out []HiLinkInfo
	for _, sw := range HiLinkSwitches(r) {
		name := sw.HiLink.Name
		hi := HiLinkInfo{Name: name, Rack: sw.Name, State: "stopped"}
		if pid := st.HiLinkPIDs[name]; alive(pid, hilinkProc(r, name, st.HiLinkExe)) {
			hi.State, hi.PID = "running", pid
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if s, err := hilink.QueryStatus(qctx, HiLinkControl(r, name)); err == nil {
				hi.Ports = s.Ports
			}
			cancel()
		}
		out = append(out, hi)
	}
	return out
}

// gpuLinkTimeout bounds the wait for the GPU backend's ports to dial a
// HiLink switch started afresh (they retry at most every 2 s).
const gpuLinkTimeout = 30 * time.Second

// gpuRelinks returns the sessions after the first of each GPU's HiLink
// port (by its ivshmem socket), as the GPU backend reports them now;
// nil when the backend does not answer.
func gpuRelinks(ctx context.Context, st *State) map[string]uint64 {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := gpu.QueryStatus(qctx, GPUControl(&st.Rack))
	if err != nil {
		return nil
	}
	m := map[string]uint64{}
	for _, x := range s.GPUs {
		if x.Link != nil {
			m[x.Socket] = x.Link.Relinks
		}
	}
	return m
}

// waitGPULinks waits until every GPU of the rack cabled to HiLink shows
// its port up in the GPU backend's status on a session newer than the
// one it had in before (gpuRelinks, taken before the switch stopped: a
// port that has not yet noticed its old switch is gone still shows up),
// and returns how many dialled again.
func waitGPULinks(ctx context.Context, st *State, before map[string]uint64, timeout time.Duration) (int, error) {
	r := &st.Rack
	want := map[string]bool{}
	for _, g := range r.gpuGuests() {
		if g.GPUs.HiLink == "" || g.GPUs.HiLink == HiLinkNone {
			continue
		}
		for _, id := range g.GPUs.IDs {
			want[GPUSocket(r, g, id)] = true
		}
	}
	if len(want) == 0 {
		return 0, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := gpu.QueryStatus(qctx, GPUControl(r))
		cancel()
		up, relinked, down := 0, 0, ""
		if err == nil {
			for _, x := range s.GPUs {
				if !want[x.Socket] {
					continue
				}
				if x.Link != nil && x.Link.Up && x.Link.Relinks > before[x.Socket] {
					up++
					relinked++
				} else if down == "" {
					down = fmt.Sprintf("GPU %d (%s)", x.ID, x.Socket)
				}
			}
			if up == len(want) {
				return relinked, nil
			}
			err = fmt.Errorf("%s has not dialled its switch again", down)
		}
		if time.Now().After(deadline) {
			return relinked, fmt.Errorf("deploy: the GPU backend's HiLink ports after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return relinked, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
