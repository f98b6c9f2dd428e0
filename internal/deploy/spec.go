// Package deploy runs QEMU racks: it reads rack specs (YAML), starts the
// HiSwitch fabric as a child process (`hinic fabric serve`), for guests
// with a HiNIC one device backend (`hinic device serve`) and for guests
// with GPUs one GPU backend (`hinic gpu serve`), then one QEMU guest per
// spec entry (TCG unless the KVM probe passes) with its data NIC on a
// fabric port (rxe: a virtio-net NIC on a qemu-stream port; hicain: the
// ivshmem-doorbell function the backend serves, the backend on a
// seqpacket port), each GPU one more ivshmem-doorbell function on the
// guest's RAM file, and its management SSH forwarded to loopback. It
// reaches the guests over SSH (golang.org/x/crypto/ssh, host keys pinned
// on first contact, files pushed with go-scp), brings up their RDMA NICs
// and GPUs, and keeps the rack's state in a run directory so that
// `status` and `down` find it from another process.
//
// Files: spec.go, specload.go and speckeys.go read and check the spec;
// rack.go is Up; state.go the run directory's state.json; supervise.go
// the child processes (start, recognise, stop); fabricconf.go the
// fabric's config and socket paths; qemu.go a guest's QEMU command line;
// guest.go a guest's set-up over SSH; status.go what `deploy status`
// shows; hicain.go and gpu.go the device and GPU backends and their
// guests' drivers; vxlan.go links to a rack on another host; hosts.go
// racks that span hosts (one part per host, a host that is a network
// namespace of this machine run through internal/netns); remote.go a
// host's part on another machine, run there over SSH; libvirt.go a
// host's guests as libvirt domains (virsh, libvirtxml); units.go the
// daemons of such a host as the host package's systemd units.
//
// deploy imports fabric, device and gpu (to query a running fabric and
// backends), image (manifests), accel (the KVM probe) and netns; it must not
// import verify or the CLI (internal/deps_test.go holds the rule).
package deploy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/PacketFive/hinic/internal/accel"
)

// NIC kinds of a guest.
const (
	NICRxe    = "rxe"    // Linux Soft-RoCE over a virtio-net NIC
	NICHicain = "hicain" // the HiNIC device: hinic device serve, hicain_net/hicain_ib, libhicain
)

// Link layers of a guest's NIC.
const (
	LinkEth = "eth" // Ethernet: RoCEv2
	LinkIB  = "ib"  // native InfiniBand (hicain only): LIDs from a subnet manager, IPoIB for the data IP
)

// OpenSMNone, as a rack's opensm, starts no subnet manager: one runs
// elsewhere on the subnet.
const OpenSMNone = "none"

// DefaultProcs is the GOMAXPROCS of a rack's daemons. One processor
// runs all their goroutines: a frame or a doorbell wakes one thread,
// which does the work itself. With more, the runtime wakes an idle
// processor's thread for each goroutine it readies, and on a host whose
// CPUs the guests' vCPUs keep busy every such thread switch is
// latency (docs/deploy.md has the figures).
const DefaultProcs = 1

// How a rack's fabric and device backend run (Rack.Daemons).
const (
	// DaemonsJoined runs the fabric inside the device backend (`hinic
	// device serve --fabric`) when the rack has hicain guests: a frame
	// between two vNICs then crosses the switch without a thread
	// switch. A rack without hicain guests has the fabric alone.
	DaemonsJoined = "joined"
	// DaemonsSplit runs `hinic fabric serve` and `hinic device serve`
	// as two processes, each restartable alone.
	DaemonsSplit = "split"
)

// DefaultImage is the image directory of guests whose spec names none
// (hinic image build's default --dir), relative to the working directory.
var DefaultImage = filepath.Join(".cache", "images", "hinic-guest")

// Rack is a rack spec. Zero values take the defaults of Defaults.
type Rack struct {
	Name        string   `yaml:"name" json:"name"`
	RunDir      string   `yaml:"run-dir" json:"run_dir"`
	Image       string   `yaml:"image" json:"image"`
	Network     string   `yaml:"network" json:"network"`
	SSHPortBase int      `yaml:"ssh-port-base" json:"ssh_port_base"`
	Accel       string   `yaml:"accel" json:"accel"`
	Pcap        bool     `yaml:"pcap" json:"pcap"`
	BootTimeout Duration `yaml:"boot-timeout" json:"boot_timeout"`
	MTU         int      `yaml:"mtu" json:"mtu"`
	// Procs is GOMAXPROCS of the rack's daemons (fabric, device and GPU
	// backends): 0 is DefaultProcs.
	Procs int `yaml:"procs" json:"procs"`
	// Daemons is how the fabric and the device backend run: DaemonsJoined
	// (the default) or DaemonsSplit.
	Daemons string `yaml:"daemons" json:"daemons"`
	// Hosts are the machines the rack spans (hosts.go); none is this
	// machine alone, as it always was.
	Hosts    []Host   `yaml:"hosts" json:"hosts,omitempty"`
	Switches []Switch `yaml:"switches" json:"switches"`
	Guests   []Guest  `yaml:"guests" json:"guests"`
	Links    []Link   `yaml:"links" json:"links"`
	// OpenSM is the guest that runs the subnet manager of a rack with
	// InfiniBand guests (default: the first of them), or "none".
	OpenSM string `yaml:"opensm" json:"opensm,omitempty"`
	// Metrics, if set, is host:port: the rack's fabric serves
	// Prometheus metrics there, its device backend on the next port and
	// its GPU backend on the one after (MetricsAddrs).
	Metrics string `yaml:"metrics" json:"metrics,omitempty"`

	// src is where ReadRack or ParseRack read the spec, for errors
	// that give the file, line and key.
	src specSource
}

// Switch is one HiSwitch of the rack: the TOR of one ORv3 rack, whose
// guests' GPUs cable to the HiLink switch under it (hilink.go).
type Switch struct {
	Name  string `yaml:"name" json:"name"`
	Ports int    `yaml:"ports" json:"ports"`
	// HiLink is the rack's HiLink switch; Defaults names it. It runs
	// when a GPU cables to it.
	HiLink HiLinkSwitch `yaml:"hilink" json:"hilink,omitzero"`
	// Host is the host (Rack.Hosts) the switch runs on; the first when
	// empty.
	Host string `yaml:"host" json:"host,omitempty"`
}

// Guest is one QEMU VM.
type Guest struct {
	Name   string `yaml:"name" json:"name"`
	Memory int    `yaml:"memory" json:"memory_mib"`
	CPUs   int    `yaml:"cpus" json:"cpus"`
	Image  string `yaml:"image" json:"image"`
	NIC    string `yaml:"nic" json:"nic"`
	// Link is the link layer of the NIC: eth (RoCEv2) or ib (native
	// InfiniBand, hicain only; IP is then the IPoIB address).
	Link    string `yaml:"link" json:"link"`
	IP      string `yaml:"ip" json:"ip"`
	MAC     string `yaml:"mac" json:"mac"`
	Switch  string `yaml:"switch" json:"switch"`
	Port    int    `yaml:"port" json:"port"`
	SSHPort int    `yaml:"ssh-port" json:"ssh_port"`
	// Host is the host the guest runs on: its switch's, which it may
	// name again.
	Host string `yaml:"host" json:"host,omitempty"`
	// Debs are .deb files copied to the guest and installed with dpkg.
	Debs []string `yaml:"debs" json:"debs"`
	// Files are copied to the guest: "LOCAL:REMOTE".
	Files []string `yaml:"files" json:"files"`
	// TrustPause lets the guest's PAUSE and PFC frames act on the
	// switch: trust-pause on its fabric port (rxe) or on its vNIC
	// (hicain). Off, they are dropped and counted.
	TrustPause bool `yaml:"trust-pause" json:"trust_pause"`
	// GPUs are the guest's HiGPU functions, served by the rack's
	// `hinic gpu serve`; none when absent.
	GPUs GPUs `yaml:"gpus" json:"gpus,omitzero"`
}

// GPUs are the emulated GPUs of one guest.
type GPUs struct {
	// Count is how many, 0 to MaxGuestGPUs.
	Count int `yaml:"count" json:"count"`
	// Memory is the device memory of each, in MiB (default
	// DefaultGPUMemory).
	Memory int `yaml:"memory" json:"memory_mib"`
	// IDs are their gpu_ids, unique, 0 to MaxGuestGPUs-1 (default 0 to
	// Count-1): /dev/higpu<id> in the guest.
	IDs []int `yaml:"ids" json:"ids"`
	// HiLink is the HiLink switch the GPUs cable to: by default the one
	// of the guest's rack (its switch's), or HiLinkNone.
	HiLink string `yaml:"hilink" json:"hilink,omitempty"`
	// HiLinkPorts are the GPUs' ports on it, one per GPU in the order
	// of IDs (default: the next free ports from 0).
	HiLinkPorts []int `yaml:"hilink-ports" json:"hilink_ports,omitempty"`
}

// Link is an inter-switch cable, "sw0:10" to "sw1:10", or with Remote
// a VXLAN link from A to a switch of a rack on another host (vxlan.go).
type Link struct {
	A      string `yaml:"a" json:"a"`
	B      string `yaml:"b" json:"b"`
	Remote string `yaml:"remote" json:"remote,omitempty"`
	Local  string `yaml:"local" json:"local,omitempty"`
	VNI    int    `yaml:"vni" json:"vni,omitempty"`
}

// Duration is a time.Duration read from YAML as "90s".
type Duration struct{ time.Duration }

// UnmarshalYAML reads "90s", "5m".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ReadRack reads a rack spec from a YAML file. Unknown keys, values of
// the wrong type and values outside a key's enum are errors; each is a
// *SpecError that names the file, the line and the key
// (testdata/racks/x.yaml:17: guests[1].nic: "foo" is not one of rxe,
// hicain), and so are the errors Defaults then finds.
func ReadRack(path string) (*Rack, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseRack(path, b)
}

// ParseRack reads a rack spec from YAML, as ReadRack does a file; its
// errors give the line and the key. Defaults checks and completes it.
func ParseRack(b []byte) (*Rack, error) { return parseRack("", b) }

// DefaultRunDir is the run directory of rack name: short, because UNIX
// socket paths must stay under 108 bytes.
func DefaultRunDir(name string) string {
	return filepath.Join(os.TempDir(), "hinic-rack-"+name)
}

// Defaults fills in what the spec leaves out; an empty spec becomes the
// canonical two-VM layout: vm-a and vm-b with rxe NICs on sw0, data network
// 10.42.0.0/24 (.1, .2), MACs 52:54:00:42:00:NN, SSH on 127.0.0.1:2222 and up.
func (r *Rack) Defaults() error {
	if r.Name == "" {
		r.Name = "rack0"
	}
	if r.RunDir == "" {
		r.RunDir = DefaultRunDir(r.Name)
	}
	if r.Image == "" {
		r.Image = DefaultImage
	}
	if r.Network == "" {
		r.Network = "10.42.0.0/24"
	}
	if r.SSHPortBase == 0 {
		r.SSHPortBase = 2222
	}
	if r.Accel == "" {
		r.Accel = accel.Auto
	}
	if !accel.Valid(r.Accel) {
		return r.src.errAt("accel", "%q: want tcg, kvm or auto (KVM only when the KVM probe boots a guest kernel)", r.Accel)
	}
	if r.MTU < 0 {
		return r.src.errAt("mtu", "%d: want 0 (the netdev's default) or a positive MTU", r.MTU)
	}
	if r.Procs < 0 {
		return r.src.errAt("procs", "%d: want 0 (the default, %d) or a positive number of processors", r.Procs, DefaultProcs)
	}
	if r.Procs == 0 {
		r.Procs = DefaultProcs
	}
	switch r.Daemons {
	case "":
		r.Daemons = DaemonsJoined
	case DaemonsJoined, DaemonsSplit:
	default:
		return r.src.errAt("daemons", "%q: want %s (the fabric inside the device backend, the default) or %s", r.Daemons, DaemonsJoined, DaemonsSplit)
	}
	if r.Metrics != "" {
		host, port, err := net.SplitHostPort(r.Metrics)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 1 || n > 65535-2 || strings.ContainsAny(host, " ,") {
			return r.src.errAt("metrics", "%q: want host:port, the first of three ports (fabric, device and GPU backends)", r.Metrics)
		}
	}
	if r.BootTimeout.Duration == 0 {
		r.BootTimeout.Duration = 300 * time.Second
	}
	if len(r.Switches) == 0 {
		r.Switches = []Switch{{Name: "sw0"}}
	}
	for i := range r.Switches {
		if r.Switches[i].Ports == 0 {
			r.Switches[i].Ports = 10
		}
	}
	if len(r.Guests) == 0 {
		r.Guests = []Guest{{Name: "vm-a"}, {Name: "vm-b"}}
	}
	prefix, err := netip.ParsePrefix(r.Network)
	if err != nil {
		return r.src.errAt("network", "%q: %v", r.Network, err)
	}
	used := map[string]bool{}
	nextPort := map[string]int{}
	for i := range r.Guests {
		g := &r.Guests[i]
		n := i + 1
		// key is the path of one of the guest's keys: guests[1].nic.
		key := func(k string) string { return fmt.Sprintf("guests[%d].%s", i, k) }
		if g.Name == "" {
			g.Name = fmt.Sprintf("vm-%d", n)
		}
		if strings.ContainsAny(g.Name, "/: ") || used[g.Name] {
			return r.src.errAt(key("name"), "guest name %q: empty, duplicate or has '/', ':' or a space", g.Name)
		}
		used[g.Name] = true
		if g.Memory == 0 {
			g.Memory = 1024
		}
		if g.CPUs == 0 {
			g.CPUs = 1
		}
		if g.Image == "" {
			g.Image = r.Image
		}
		if g.NIC == "" {
			g.NIC = NICRxe
		}
		if g.NIC != NICRxe && g.NIC != NICHicain {
			return r.src.errAt(key("nic"), "%q is not one of rxe, hicain (guest %s)", g.NIC, g.Name)
		}
		switch g.Link {
		case "", LinkEth, "ethernet":
			g.Link = LinkEth
		case LinkIB, "infiniband":
			g.Link = LinkIB
		default:
			return r.src.errAt(key("link"), "%q is not one of eth, ib: the valid link layers (guest %s)", g.Link, g.Name)
		}
		if g.Link == LinkIB && g.NIC != NICHicain {
			return r.src.errAt(key("link"), "guest %s: link ib needs nic hicain (Soft-RoCE is RoCEv2 only)", g.Name)
		}
		if g.NIC == NICHicain && r.MTU != 0 && (r.MTU < hicainMinMTU || r.MTU > hicainMaxMTU) {
			return r.src.errAt("mtu", "%d: guest %s has a hicain NIC, which takes %d to %d bytes (0 keeps 1500)",
				r.MTU, g.Name, hicainMinMTU, hicainMaxMTU)
		}
		if g.IP == "" {
			a := prefix.Addr().As4()
			a[3] = byte(n)
			g.IP = netip.AddrFrom4(a).String()
		}
		ip, err := netip.ParseAddr(g.IP)
		if err != nil || !prefix.Contains(ip) {
			return r.src.errAt(key("ip"), "guest %s: ip %q is not in %s", g.Name, g.IP, r.Network)
		}
		if g.MAC == "" {
			g.MAC = fmt.Sprintf("52:54:00:42:00:%02x", n)
		}
		if g.Switch == "" {
			g.Switch = r.Switches[0].Name
		}
		sw := r.switchByName(g.Switch)
		if sw == nil {
			return r.src.errAt(key("switch"), "guest %s: no switch %q", g.Name, g.Switch)
		}
		if g.Port == 0 {
			nextPort[g.Switch]++
			g.Port = nextPort[g.Switch]
		}
		if g.Port < 1 || g.Port > sw.Ports {
			return r.src.errAt(key("port"), "guest %s: port %d of %s is out of range 1..%d", g.Name, g.Port, g.Switch, sw.Ports)
		}
		if g.SSHPort == 0 {
			g.SSHPort = r.SSHPortBase + i
		}
		if err := g.GPUs.defaults(); err != nil {
			return r.src.errAt(key("gpus"), "guest %s: gpus: %v", g.Name, err)
		}
	}
	if err := r.hostsDefaults(); err != nil {
		return err
	}
	if err := r.ibDefaults(); err != nil {
		return err
	}
	return r.hilinkDefaults()
}

// ibDefaults checks the InfiniBand guests: a switch carries one link
// layer (its guests' and its inter-switch links'), and the subnet
// manager runs in one of them unless the rack says none.
func (r *Rack) ibDefaults() error {
	link := map[string]string{}
	for i, g := range r.Guests {
		if l, ok := link[g.Switch]; ok && l != g.Link {
			return r.src.errAt(fmt.Sprintf("guests[%d].link", i),
				"switch %s has guests of link layers %s and %s; give each link layer its own switches", g.Switch, l, g.Link)
		}
		link[g.Switch] = g.Link
	}
	for i, l := range r.Links {
		if l.remote() {
			if err := r.checkRemoteLink(i, l); err != nil {
				return err
			}
			continue
		}
		a, b := r.linkSwitch(l.A), r.linkSwitch(l.B)
		if la, lb := link[a], link[b]; la != "" && lb != "" && la != lb {
			return r.src.errAt(fmt.Sprintf("links[%d]", i), "link %s-%s joins an %s switch to an %s switch", l.A, l.B, la, lb)
		}
	}
	ib := r.ibGuests()
	switch {
	case len(ib) == 0 && r.OpenSM != "" && r.OpenSM != OpenSMNone:
		return r.src.errAt("opensm", "%q: the rack has no link ib guest", r.OpenSM)
	case len(ib) == 0, r.OpenSM == OpenSMNone:
	case r.OpenSM == "":
		r.OpenSM = ib[0].Name
	default:
		for _, g := range ib {
			if g.Name == r.OpenSM {
				return nil
			}
		}
		return r.src.errAt("opensm", "%q: not a link ib guest of the rack", r.OpenSM)
	}
	return nil
}

// ibGuests returns the guests whose NIC is InfiniBand.
func (r *Rack) ibGuests() []Guest {
	return r.guestsWhere(func(g Guest) bool { return g.Link == LinkIB })
}

// guestsWhere returns the guests for which keep is true, in spec order.
func (r *Rack) guestsWhere(keep func(Guest) bool) []Guest {
	var gs []Guest
	for _, g := range r.Guests {
		if keep(g) {
			gs = append(gs, g)
		}
	}
	return gs
}

// SwitchLink is the link layer of switch sw: that of its guests, or of
// the guests of the switches its inter-switch links reach; eth when none
// has guests.
func (r *Rack) SwitchLink(sw string) string {
	seen := map[string]bool{}
	var walk func(string) string
	walk = func(s string) string {
		if seen[s] {
			return ""
		}
		seen[s] = true
		for _, g := range r.Guests {
			if g.Switch == s {
				return g.Link
			}
		}
		for _, l := range r.Links {
			a, b := r.linkSwitch(l.A), r.linkSwitch(l.B)
			if a == s {
				if x := walk(b); x != "" {
					return x
				}
			} else if b == s {
				if x := walk(a); x != "" {
					return x
				}
			}
		}
		return ""
	}
	if l := walk(sw); l != "" {
		return l
	}
	return LinkEth
}

// linkSwitch is the switch of a link end "sw0:10".
func (r *Rack) linkSwitch(end string) string {
	sw, _, _ := strings.Cut(end, ":")
	return sw
}

func (r *Rack) switchByName(name string) *Switch {
	for i := range r.Switches {
		if r.Switches[i].Name == name {
			return &r.Switches[i]
		}
	}
	return nil
}

// MetricsAddrs are the --metrics addresses of the rack's fabric, device
// backend and GPU backend: the spec's metrics and the two ports after
// it; empty when the spec sets none.
func MetricsAddrs(r *Rack) (fabric, device, gpu string) {
	host, port, err := net.SplitHostPort(r.Metrics)
	n, perr := strconv.Atoi(port)
	if r.Metrics == "" || err != nil || perr != nil {
		return "", "", ""
	}
	at := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(n+i)) }
	return at(0), at(1), at(2)
}

// PrefixLen is the data network's prefix length.
func (r *Rack) PrefixLen() int {
	p, _ := netip.ParsePrefix(r.Network)
	return p.Bits()
}

// ErrNotDeployed is returned when a run directory holds no rack.
var ErrNotDeployed = errors.New("deploy: no rack state")
