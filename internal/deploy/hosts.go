package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/netns"
	"github.com/PacketFive/hinic/internal/proto"
)

// A rack that spans hosts names them under hosts: each switch runs on
// one (switches[].host), each guest on its switch's, and a link between
// switches of two hosts is a VXLAN link (an ib link: IB-over-UDP)
// between the hosts' addresses, with the VNI the spec gives it. Deploy
// splits such a rack into one rack per host (HostRack), each with its
// own fabric, device backend and guests in RUN-DIR/HOST, exactly as a
// one-host rack runs; the rack's own run directory holds a state that
// lists the hosts' run directories and all the guests, so that status,
// exec, down and the gate see one rack.
//
// A host with netns is a network namespace of this machine (two hosts on
// one machine, for tests): its part runs in it through `ip netns exec`
// and deploy reaches its guests' SSH forwards by opening the socket in
// it (netns.Dial). A host with ssh is another machine, whose own hinic
// deploy runs over SSH to deploy, show and take down its part there
// (remote.go). A host with neither is this machine itself when deploy
// runs every host (at most one may lack both then), or another machine,
// which deploys its own part there (UpOptions.Host, `deploy rack --host
// NAME`).
// A guest's SSH forward listens on its host's address, so that the
// other hosts (and the gate) reach it over the underlay.

// Host is one machine, or one network namespace, of a rack that spans
// several.
type Host struct {
	Name string `yaml:"name" json:"name"`
	// Address is the host's IP address on the underlay: its VXLAN links
	// bind it and its guests' SSH forwards listen on it.
	Address string `yaml:"address" json:"address"`
	// Netns, when set, is the network namespace of this machine that
	// stands in for the host (ip netns add NAME).
	Netns string `yaml:"netns" json:"netns,omitempty"`
	// Libvirt, when set, is the libvirt connection URI the host's
	// guests are defined and started through (libvirt.go): qemu:///system
	// or qemu+ssh://[USER@]HOST/system. Without it deploy runs QEMU
	// itself.
	Libvirt string `yaml:"libvirt" json:"libvirt,omitempty"`
	// SSH, when set, makes the host another machine that the machine
	// running deploy reaches with the system ssh client,
	// "[USER@]HOST[:PORT]": deploy, status and down run that machine's
	// own hinic there (remote.go).
	SSH string `yaml:"ssh" json:"ssh,omitempty"`
	// Hinic is the hinic binary of an ssh host (default hinic, on the
	// remote user's PATH).
	Hinic string `yaml:"hinic" json:"hinic,omitempty"`
	// RemoteRunDir is the rack's run directory on an ssh host, which
	// keeps its part in RemoteRunDir/NAME (default: the same absolute
	// path as the rack's run directory here).
	RemoteRunDir string `yaml:"run-dir" json:"remote_run_dir,omitempty"`
}

// HostState is a host of a deployed rack that spans hosts, and where
// its part of the rack keeps its state.
type HostState struct {
	Host
	RunDir string `json:"run_dir"`
}

// hostsDefaults checks hosts and places switches and guests on them: a
// switch without host on the first, a guest on its switch's. A link
// between switches on two hosts needs a vni; one within a host has none.
func (r *Rack) hostsDefaults() error {
	if len(r.Hosts) == 0 {
		for i, s := range r.Switches {
			if s.Host != "" {
				return r.src.errAt(fmt.Sprintf("switches[%d].host", i), "%q: the rack names no hosts", s.Host)
			}
		}
		for i, g := range r.Guests {
			if g.Host != "" {
				return r.src.errAt(fmt.Sprintf("guests[%d].host", i), "%q: the rack names no hosts", g.Host)
			}
		}
		for i, l := range r.Links {
			if !l.remote() && l.VNI != 0 {
				return r.src.errAt(fmt.Sprintf("links[%d].vni", i), "%d: a link between two switches of one host has no vni (name hosts to span several)", l.VNI)
			}
		}
		return nil
	}
	names, addrs, nss := map[string]bool{}, map[netip.Addr]bool{}, map[string]bool{}
	for i := range r.Hosts {
		h := &r.Hosts[i]
		key := func(k string) string { return fmt.Sprintf("hosts[%d].%s", i, k) }
		if h.Name == "" || strings.ContainsAny(h.Name, "/: ") || names[h.Name] {
			return r.src.errAt(key("name"), "host name %q: empty, duplicate or has '/', ':' or a space", h.Name)
		}
		names[h.Name] = true
		a, err := netip.ParseAddr(h.Address)
		if err != nil || a.Zone() != "" {
			return r.src.errAt(key("address"), "host %s: %q is not an IP address (the host's address on the underlay)", h.Name, h.Address)
		}
		if addrs[a] {
			return r.src.errAt(key("address"), "host %s: %s is another host's address", h.Name, h.Address)
		}
		addrs[a] = true
		if h.Netns != "" {
			if strings.ContainsAny(h.Netns, "/ ") || h.Netns == "." || h.Netns == ".." || nss[h.Netns] {
				return r.src.errAt(key("netns"), "host %s: netns %q: duplicate or not a namespace name", h.Name, h.Netns)
			}
			nss[h.Netns] = true
		}
		if h.Libvirt != "" {
			if err := checkLibvirtURI(h.Libvirt); err != nil {
				return r.src.errAt(key("libvirt"), "host %s: %v", h.Name, err)
			}
			if h.Netns != "" {
				return r.src.errAt(key("libvirt"), "host %s: a libvirt host is a machine, and its guests run where its libvirtd does: give it no netns", h.Name)
			}
			if h.SSH != "" && !localLibvirt(h.Libvirt) {
				return r.src.errAt(key("libvirt"), "host %s: %s: the hinic of an ssh host drives the libvirtd of that machine itself: give it its local URI, libvirt: qemu:///system", h.Name, h.Libvirt)
			}
		}
		if h.SSH != "" {
			if _, err := parseSSHDest(h.SSH); err != nil {
				return r.src.errAt(key("ssh"), "host %s: %v", h.Name, err)
			}
			if h.Netns != "" {
				return r.src.errAt(key("ssh"), "host %s: an ssh host is another machine, a netns one is a namespace of this one: give it one of ssh and netns", h.Name)
			}
		}
		for _, kv := range [][2]string{{"hinic", h.Hinic}, {"run-dir", h.RemoteRunDir}} {
			if kv[1] != "" && h.SSH == "" {
				return r.src.errAt(key(kv[0]), "host %s: %s is for a host reached over ssh: give it ssh: [USER@]HOST[:PORT]", h.Name, kv[0])
			}
		}
		if h.RemoteRunDir != "" && (!filepath.IsAbs(h.RemoteRunDir) || strings.ContainsAny(h.RemoteRunDir, "\n")) {
			return r.src.errAt(key("run-dir"), "host %s: %q is not an absolute path", h.Name, h.RemoteRunDir)
		}
	}
	if slices.ContainsFunc(r.Hosts, func(h Host) bool { return h.Libvirt != "" }) && strings.ContainsAny(r.Name, "/ \t\n") {
		return r.src.errAt("name", "%q: the rack's libvirt domains are named hinic-NAME-GUEST, which has no '/' or spaces", r.Name)
	}
	used := map[string]bool{}
	for i := range r.Switches {
		s := &r.Switches[i]
		if s.Host == "" {
			s.Host = r.Hosts[0].Name
		}
		if !names[s.Host] {
			return r.src.errAt(fmt.Sprintf("switches[%d].host", i), "switch %s: no host %q", s.Name, s.Host)
		}
		used[s.Host] = true
	}
	for _, h := range r.Hosts {
		if !used[h.Name] {
			return r.src.errAt("hosts", "host %s has no switch: give one switches[].host: %s", h.Name, h.Name)
		}
	}
	ports := map[string]string{}
	for i := range r.Guests {
		g := &r.Guests[i]
		sh := r.switchByName(g.Switch).Host
		if g.Host != "" && g.Host != sh {
			return r.src.errAt(fmt.Sprintf("guests[%d].host", i), "guest %s: host %q, but its switch %s is on %s", g.Name, g.Host, g.Switch, sh)
		}
		g.Host = sh
		// A guest's SSH forward listens on its host's address.
		fwd := net.JoinHostPort(r.host(sh).Address, strconv.Itoa(g.SSHPort))
		if o, ok := ports[fwd]; ok {
			return r.src.errAt(fmt.Sprintf("guests[%d].ssh-port", i), "guest %s: SSH %s is guest %s's too", g.Name, fwd, o)
		}
		ports[fwd] = g.Name
	}
	for i, l := range r.Links {
		if l.remote() {
			continue
		}
		ha, hb := r.linkHost(l.A), r.linkHost(l.B)
		at := func(k string) string { return fmt.Sprintf("links[%d].%s", i, k) }
		switch {
		case ha == "" || hb == "":
			// Defaults' link checks report the missing switch.
		case ha != hb && (l.VNI < 1 || l.VNI > proto.MaxVNI):
			return r.src.errAt(at("vni"), "%d: link %s-%s joins hosts %s and %s: it is a VXLAN link and needs a vni, 1 to %d", l.VNI, l.A, l.B, ha, hb, proto.MaxVNI)
		case ha == hb && l.VNI != 0:
			return r.src.errAt(at("vni"), "%d: link %s-%s is within host %s and has no vni", l.VNI, l.A, l.B, ha)
		}
	}
	return nil
}

// host returns the host of that name, or nil.
func (r *Rack) host(name string) *Host {
	for i := range r.Hosts {
		if r.Hosts[i].Name == name {
			return &r.Hosts[i]
		}
	}
	return nil
}

// hostNames lists the rack's hosts, "a, b", or "none".
func (r *Rack) hostNames() string {
	var names []string
	for _, h := range r.Hosts {
		names = append(names, h.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// linkHost is the host of the switch of a link end, "" if none.
func (r *Rack) linkHost(end string) string {
	if s := r.switchByName(r.linkSwitch(end)); s != nil {
		return s.Host
	}
	return ""
}

// spansHosts reports whether the rack runs on several hosts: deploy
// splits it into one rack per host.
func (r *Rack) spansHosts() bool { return len(r.Hosts) > 1 }

// placed is the host a one-host rack is placed on, if it names one.
func (r *Rack) placed() Host {
	if len(r.Hosts) == 1 {
		return r.Hosts[0]
	}
	return Host{}
}

// netns is the network namespace the rack's processes run in: its
// host's, "" for this machine's own.
func (r *Rack) netns() string { return r.placed().Netns }

// guestSSH is where guest g's SSH forward listens and the namespace to
// dial it from: its host's address (loopback on a rack without hosts).
func (r *Rack) guestSSH(g Guest) (addr, ns string) {
	h := Host{Address: "127.0.0.1"}
	if x := r.host(g.Host); x != nil {
		h = *x
	}
	return net.JoinHostPort(h.Address, strconv.Itoa(g.SSHPort)), h.Netns
}

// HostRack returns the part of the rack on host name, a rack of its own:
// that host only, its switches and guests, its run directory RUN-DIR/NAME,
// the links within it, and each link to a switch on another host as a
// remote link from its own end between the two hosts' addresses. The
// subnet manager of InfiniBand guests runs in the host of the guest the
// rack names; the other hosts start none. Call it after Defaults.
func (r *Rack) HostRack(name string) *Rack {
	h := r.host(name)
	if h == nil {
		return nil
	}
	sub := *r
	sub.Hosts = []Host{*h}
	sub.RunDir = filepath.Join(r.RunDir, h.Name)
	sub.Switches, sub.Guests, sub.Links = nil, nil, nil
	for _, s := range r.Switches {
		if s.Host == name {
			sub.Switches = append(sub.Switches, s)
		}
	}
	sub.Guests = r.guestsWhere(func(g Guest) bool { return g.Host == name })
	for _, l := range r.Links {
		if l.remote() {
			if r.linkHost(l.A) == name {
				sub.Links = append(sub.Links, l)
			}
			continue
		}
		ha, hb := r.linkHost(l.A), r.linkHost(l.B)
		switch {
		case ha == name && hb == name:
			sub.Links = append(sub.Links, l)
		case ha == name:
			sub.Links = append(sub.Links, Link{A: l.A, Remote: r.host(hb).Address, Local: h.Address, VNI: l.VNI})
		case hb == name:
			sub.Links = append(sub.Links, Link{A: l.B, Remote: r.host(ha).Address, Local: h.Address, VNI: l.VNI})
		}
	}
	if r.OpenSM != "" && r.OpenSM != OpenSMNone {
		if g := sub.guestsWhere(func(g Guest) bool { return g.Name == r.OpenSM }); len(g) == 0 {
			sub.OpenSM = OpenSMNone
		}
	}
	return &sub
}

// upHosts deploys a rack that spans hosts: each host's part (HostRack)
// in parallel, in its network namespace, with the rack's SSH key; then
// the state that joins them and the guests' SSH mesh across hosts.
func upHosts(ctx context.Context, r *Rack, o UpOptions) (*State, error) {
	p := o.Progress
	if p == nil {
		p = func(string, ...any) {}
	}
	runDir, err := filepath.Abs(r.RunDir)
	if err != nil {
		return nil, err
	}
	r.RunDir = runDir
	var here []string
	for _, h := range r.Hosts {
		if h.Netns == "" && h.SSH == "" {
			here = append(here, h.Name)
		}
	}
	if len(here) > 1 {
		return nil, fmt.Errorf("deploy: hosts %s have no netns and no ssh, and one machine cannot be them all: give the other machines ssh: [USER@]HOST, or deploy each host's part on its own machine with --host NAME (docs/deploy.md, \"Across hosts\")", strings.Join(here, ", "))
	}
	if slices.ContainsFunc(r.Hosts, func(h Host) bool { return h.SSH != "" }) {
		if _, err := exec.LookPath(sshBase()[0]); err != nil {
			return nil, fmt.Errorf("deploy: hosts with ssh: are reached with %s: %w (Debian's openssh-client, or set %s)", sshBase()[0], err, EnvSSH)
		}
	}
	for _, h := range r.Hosts {
		if h.Netns != "" {
			if err := netns.Check(h.Netns); err != nil {
				return nil, fmt.Errorf("deploy: host %s: %w", h.Name, err)
			}
		}
	}
	if err := ensurePrivateDir(runDir); err != nil {
		return nil, err
	}
	keyPath := filepath.Join(runDir, FileKey)
	if _, _, err := EnsureKey(keyPath); err != nil {
		return nil, err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(keyPath + ".pub")
	if err != nil {
		return nil, err
	}
	st := &State{path: filepath.Join(runDir, FileState), Rack: *r, Started: time.Now().UTC().Truncate(time.Second)}
	subs := make([]*State, len(r.Hosts))
	knowns := make([][]byte, len(r.Hosts))
	errs := make([]error, len(r.Hosts))
	var wg sync.WaitGroup
	for i, h := range r.Hosts {
		hp := func(format string, a ...any) { p(h.Name+": "+format, a...) }
		if h.SSH != "" {
			// Another machine: its own hinic deploys its part there.
			st.Hosts = append(st.Hosts, HostState{Host: h, RunDir: h.partDir(runDir)})
			wg.Add(1)
			go func() {
				defer wg.Done()
				subs[i], knowns[i], errs[i] = upRemote(ctx, r, h, key, pub, hp)
			}()
			continue
		}
		sub := r.HostRack(h.Name)
		st.Hosts = append(st.Hosts, HostState{Host: h, RunDir: sub.RunDir})
		// Every host's guests take the rack's key: one key reaches them
		// all, as the gate and the mesh need.
		if err := ensurePrivateDir(sub.RunDir); err != nil {
			return nil, err
		}
		if err := writePrivate(filepath.Join(sub.RunDir, FileKey), key); err != nil {
			return nil, err
		}
		if err := writePrivate(filepath.Join(sub.RunDir, FileKey+".pub"), pub); err != nil {
			return nil, err
		}
		so := o
		so.noMesh = true
		so.Progress = hp
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[i], errs[i] = Up(ctx, sub, so)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("host %s: %w", h.Name, errs[i])
			}
		}()
	}
	wg.Wait()
	// The joined state: every guest, in the spec's order, and the host
	// keys the hosts' parts pinned.
	byName := map[string]GuestState{}
	var known []byte
	for i, s := range subs {
		if s == nil {
			continue
		}
		for _, g := range s.Guests {
			byName[g.Name] = g
		}
		b := knowns[i]
		if st.Hosts[i].SSH == "" {
			var err error
			b, err = os.ReadFile(filepath.Join(st.Hosts[i].RunDir, FileKnownHosts))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return st, err
			}
		}
		known = append(known, b...)
		st.Timings = append(st.Timings, s.Timings...)
	}
	for _, g := range r.Guests {
		gs, ok := byName[g.Name]
		if !ok {
			gs = GuestState{Name: g.Name, NIC: g.NIC, Link: g.Link, DataIP: g.IP, Dir: filepath.Join(st.hostDir(g.Host), g.Name)}
			gs.SSHAddr, gs.Netns = r.guestSSH(g)
		}
		st.Guests = append(st.Guests, gs)
	}
	if err := writePrivate(filepath.Join(runDir, FileKnownHosts), known); err != nil {
		return st, err
	}
	if err := st.save(); err != nil {
		return st, err
	}
	if err := errors.Join(errs...); err != nil {
		return st, err
	}
	t := time.Now()
	err = setupMesh(ctx, st, p)
	st.Timings = append(st.Timings, StepTiming{Step: "mesh", Seconds: time.Since(t).Seconds()})
	if err != nil {
		return st, err
	}
	return st, st.save()
}

// hostDir is the run directory of host name's part: on that machine
// for an ssh host.
func (s *State) hostDir(name string) string {
	for _, h := range s.Hosts {
		if h.Name == name {
			return h.RunDir
		}
	}
	return filepath.Join(s.Rack.RunDir, name)
}

// downHosts stops every host's part of a rack that spans hosts.
func downHosts(st *State, p Progress) error {
	var errs []error
	for _, h := range st.Hosts {
		hp := func(format string, a ...any) { p(h.Name+": "+format, a...) }
		if err := h.partDown(context.Background(), hp); err != nil {
			errs = append(errs, err)
		}
	}
	st.Down = true
	if err := st.save(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
