package fabric

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rundir"
)

// Named defaults. docs/fabric.md lists them; change both together.
const (
	// DefaultPorts is the number of ports of a switch that does not say.
	DefaultPorts = 10
	// MaxPorts is the most ports one switch may have (the IB port number
	// is one byte and 255 is reserved).
	MaxPorts = 254
	// DefaultSwitchName names the switch of a config without switches.
	DefaultSwitchName = "sw0"
	// DefaultAgingTime is how long a learned FDB entry lives without
	// traffic (IEEE 802.1Q's recommended 300 s, as Open vSwitch uses).
	DefaultAgingTime = 300 * time.Second
	// DefaultFDBSize bounds the learned entries of one switch.
	DefaultFDBSize = 8192
	// DefaultMaxFrame is the largest frame a port accepts: a 9000-byte
	// jumbo MTU plus Ethernet and VLAN headers, rounded up.
	DefaultMaxFrame = 9216
	// MinMaxFrame is the smallest max-frame a port may be given.
	MinMaxFrame = 64
	// DefaultQueueFrames and DefaultQueueBytes bound each egress queue
	// (one per port and traffic class); a frame is admitted while both
	// hold.
	DefaultQueueFrames = 1024
	DefaultQueueBytes  = ByteSize(1 << 20)
	// DefaultXOFF and DefaultXON are the PFC thresholds on the bytes one
	// ingress port has buffered in one lossless class.
	DefaultXOFF = ByteSize(128 << 10)
	DefaultXON  = ByteSize(64 << 10)
	// DefaultPauseQuanta is the pause time HiSwitch sends in an XOFF.
	DefaultPauseQuanta = 0xFFFF
	// DefaultSpeed is a port's nominal speed, used to convert pause
	// quanta into time.
	DefaultSpeed = BitRate(100e9)
	// DefaultECNKMin, DefaultECNKMax and DefaultECNPMax are the RED-like
	// marking parameters on egress queue depth (DCQCN-style).
	DefaultECNKMin = ByteSize(64 << 10)
	DefaultECNKMax = ByteSize(512 << 10)
	DefaultECNPMax = 0.2
	// DefaultSocketBuffer is the default SocketBuffer.
	DefaultSocketBuffer = ByteSize(1 << 20)
	// DefaultPcapMax is the default PcapMax.
	DefaultPcapMax = ByteSize(256 << 20)
	// DefaultShmMax is the default ShmMax: room for two rings of 1024
	// jumbo-frame slots.
	DefaultShmMax = ByteSize(24 << 20)
	// DefaultIOBatch is the number of frames one recvmmsg or sendmmsg
	// moves at most.
	DefaultIOBatch = 32
	// NumTC is the number of traffic classes (IEEE 802.1Q).
	NumTC = 8
)

// Port kinds.
const (
	KindSeqpacket  = "seqpacket"   // UNIX SOCK_SEQPACKET with the HiNIC hello
	KindQEMUStream = "qemu-stream" // QEMU 7.2 -netdev stream: 4-byte length, no hello
	KindVXLAN      = "vxlan"       // a link to a switch on another host over UDP (tunnel.go)
)

// Link layers of a port.
const (
	LinkEthernet = "ethernet"
	LinkIB       = "ib"
)

// Config describes a fabric: one or more switches, the links between
// them, and where their sockets live. It is read from the "fabric" key of
// the configuration (docs/fabric.md); the zero Config is one 10-port
// switch in the default run directory.
type Config struct {
	// RunDir holds the port sockets and control.sock.
	RunDir string `mapstructure:"run-dir" json:"run_dir,omitempty" yaml:"run-dir,omitempty"`
	// Ports is the port count of every switch that does not give one.
	Ports int `mapstructure:"ports" json:"ports,omitempty" yaml:"ports,omitempty"`
	// Pcap, when not empty, is a directory that receives one capture per
	// port.
	Pcap string `mapstructure:"pcap" json:"pcap,omitempty" yaml:"pcap,omitempty"`
	// PcapMax caps one capture file; a port's capture that reaches it is
	// rotated (the full file becomes NAME.pcap.1, replacing the one
	// before), so a port keeps at most twice PcapMax. Default
	// DefaultPcapMax.
	PcapMax ByteSize `mapstructure:"pcap-max" json:"pcap_max,omitempty" yaml:"pcap-max,omitempty"`
	// IOBatch is the most frames moved by one recvmmsg or sendmmsg; 1
	// disables batching.
	IOBatch int `mapstructure:"io-batch" json:"io_batch,omitempty" yaml:"io-batch,omitempty"`
	// SocketBuffer is the send and receive buffer size asked for on each
	// port connection (the kernel caps it at net.core.wmem_max and
	// rmem_max).
	SocketBuffer ByteSize `mapstructure:"socket-buffer" json:"socket_buffer,omitempty" yaml:"socket-buffer,omitempty"`
	// NoShm refuses shared-memory ports: every HiNIC port carries its
	// frames over its socket.
	NoShm bool `mapstructure:"no-shm" json:"no_shm,omitempty" yaml:"no-shm,omitempty"`
	// ShmMax is the largest shared-memory region (both rings, buffers
	// included) one port accepts from its peer; a peer that asks for
	// more stays on the socket. Default DefaultShmMax.
	ShmMax ByteSize `mapstructure:"shm-max" json:"shm_max,omitempty" yaml:"shm-max,omitempty"`
	// ShmNoPoll turns the adaptive polling of shared-memory ports off:
	// every wait sleeps on its eventfd at once (less CPU, more latency).
	ShmNoPoll bool `mapstructure:"shm-no-poll" json:"shm_no_poll,omitempty" yaml:"shm-no-poll,omitempty"`
	// Switches lists the switches; none means one switch named sw0.
	Switches []SwitchConfig `mapstructure:"switches" json:"switches,omitempty" yaml:"switches,omitempty"`
	// Links joins switch ports of this process with socket pairs.
	Links []LinkConfig `mapstructure:"links" json:"links,omitempty" yaml:"links,omitempty"`

	// Clock drives aging and pause timers; nil means the system clock.
	Clock clock.Clock `mapstructure:"-" json:"-" yaml:"-"`
	// Logger receives port up/down and setup messages; nil discards them.
	Logger *slog.Logger `mapstructure:"-" json:"-" yaml:"-"`
	// NewIB makes the IB engine of a switch with IB ports; nil uses
	// package ibsw.
	NewIB func(IBConfig) (IBSwitch, error) `mapstructure:"-" json:"-" yaml:"-"`
	// DialTunnel opens the UDP socket of a vxlan port with d (which
	// binds the local address); nil is d.Dial. Tests use it to open the
	// socket in another network namespace.
	DialTunnel func(d *net.Dialer, network, address string) (net.Conn, error) `mapstructure:"-" json:"-" yaml:"-"`
}

// SwitchConfig describes one switch.
type SwitchConfig struct {
	Name  string `mapstructure:"name" yaml:"name,omitempty"`
	Ports int    `mapstructure:"ports" yaml:"ports,omitempty"`
	// NodeGUID is the switch's IB node GUID (also its port GUID in
	// hellos); 0 derives one from the name.
	NodeGUID uint64 `mapstructure:"node-guid" yaml:"node-guid,omitempty"`
	// MAC is the base MAC; port N uses base+N. Empty derives a locally
	// administered address from the name.
	MAC string `mapstructure:"mac" yaml:"mac,omitempty"`
	// Aging is the FDB aging time (with a unit: "300s", "5m").
	Aging time.Duration `mapstructure:"aging" yaml:"aging,omitempty"`
	// FDBSize bounds the learned FDB entries.
	FDBSize int `mapstructure:"fdb-size" yaml:"fdb-size,omitempty"`
	// MaxFrame is the default max-frame of the ports.
	MaxFrame int `mapstructure:"max-frame" yaml:"max-frame,omitempty"`
	// Static FDB entries; they never age and learning never moves them.
	Static []StaticEntry `mapstructure:"static" yaml:"static,omitempty"`
	// Queues bounds each per-port, per-class egress queue.
	Queues QueueConfig `mapstructure:"queues" yaml:"queues,omitempty"`
	// PCPToTC maps 802.1Q priorities to traffic classes (8 entries);
	// empty is the identity.
	PCPToTC []int `mapstructure:"pcp-to-tc" yaml:"pcp-to-tc,omitempty"`
	// DSCPToTC overrides the traffic class of untagged IP frames by DSCP
	// (the default is DSCP>>3: 26 -> TC3, 48 -> TC6).
	DSCPToTC map[string]int `mapstructure:"dscp-to-tc" yaml:"dscp-to-tc,omitempty"`
	// Scheduler chooses strict-priority and ETS classes.
	Scheduler SchedulerConfig `mapstructure:"scheduler" yaml:"scheduler,omitempty"`
	PFC       PFCConfig       `mapstructure:"pfc" yaml:"pfc,omitempty"`
	ECN       ECNConfig       `mapstructure:"ecn" yaml:"ecn,omitempty"`
	// Port holds per-port settings, by port number.
	Port []PortConfig `mapstructure:"port" yaml:"port,omitempty"`
}

// StaticEntry is a static FDB entry.
type StaticEntry struct {
	MAC  string `mapstructure:"mac" yaml:"mac,omitempty"`
	VLAN int    `mapstructure:"vlan" yaml:"vlan,omitempty"` // 0 means 1
	Port int    `mapstructure:"port" yaml:"port,omitempty"`
}

// QueueConfig bounds one egress queue.
type QueueConfig struct {
	Frames int      `mapstructure:"frames" yaml:"frames,omitempty"`
	Bytes  ByteSize `mapstructure:"bytes" yaml:"bytes,omitempty"`
}

// SchedulerConfig selects the transmission selection algorithm per
// traffic class (IEEE 802.1Qaz): classes in Strict are served first,
// highest class first; the others share what is left by ETS (deficit
// round robin) in proportion to Weights.
type SchedulerConfig struct {
	Strict  []int `mapstructure:"strict" yaml:"strict,omitempty"`   // default [6, 7]
	Weights []int `mapstructure:"weights" yaml:"weights,omitempty"` // 8 entries; default equal
}

// PFCConfig configures priority flow control (IEEE 802.1Qbb).
type PFCConfig struct {
	// Lossless lists the lossless traffic classes; default [3]. An
	// empty list in the file keeps the default; use [-1] for none.
	Lossless []int `mapstructure:"lossless" yaml:"lossless,omitempty"`
	// XOFF and XON are thresholds on the bytes an ingress port has
	// buffered in one lossless class.
	XOFF ByteSize `mapstructure:"xoff" yaml:"xoff,omitempty"`
	XON  ByteSize `mapstructure:"xon" yaml:"xon,omitempty"`
	// Quanta is the pause time sent in an XOFF.
	Quanta int `mapstructure:"quanta" yaml:"quanta,omitempty"`
}

// ECNConfig configures ECN marking on egress queue depth: no mark below
// KMin bytes, probability rising linearly to PMax at KMax, always above
// KMax (RED as DCQCN switches use it). KMin == KMax is a plain threshold.
type ECNConfig struct {
	Disabled bool     `mapstructure:"disabled" yaml:"disabled,omitempty"`
	KMin     ByteSize `mapstructure:"kmin" yaml:"kmin,omitempty"`
	KMax     ByteSize `mapstructure:"kmax" yaml:"kmax,omitempty"`
	PMax     float64  `mapstructure:"pmax" yaml:"pmax,omitempty"`
	Seed     uint64   `mapstructure:"seed" yaml:"seed,omitempty"`
}

// PortConfig holds the settings of one port.
type PortConfig struct {
	Num int `mapstructure:"num" yaml:"num,omitempty"`
	// Link is "ethernet" (default) or "ib".
	Link string `mapstructure:"link" yaml:"link,omitempty"`
	// Kind is "seqpacket" (default), "qemu-stream" or "vxlan".
	Kind string `mapstructure:"kind" yaml:"kind,omitempty"`
	// Remote is a vxlan port's peer, host:port; the port defaults to
	// 4789 (VXLAN) on an Ethernet link and 4792 (IB-over-UDP) on an IB
	// link. Only datagrams from this address are taken.
	Remote string `mapstructure:"remote" yaml:"remote,omitempty"`
	// Local is the address a vxlan port binds, host:port; empty binds
	// every address on the default port of the link.
	Local string `mapstructure:"local" yaml:"local,omitempty"`
	// VNI is a vxlan port's VXLAN network identifier (or IB-over-UDP
	// link identifier), 1 to 16777215; both ends use the same.
	VNI int `mapstructure:"vni" yaml:"vni,omitempty"`
	// Path overrides the socket path.
	Path string `mapstructure:"path" yaml:"path,omitempty"`
	// Dial makes the switch connect instead of listening, and connect
	// again whenever the connection ends: on a seqpacket port, to
	// another process's switch port (an inter-switch link); on a
	// qemu-stream port, to the socket of a QEMU -netdev
	// stream,server=on, which takes a new client after the last one
	// left (QEMU 7.2 has no client reconnect), so the guest's link comes
	// back after the fabric restarts.
	Dial string `mapstructure:"dial" yaml:"dial,omitempty"`
	// Speed converts PFC pause quanta into time.
	Speed BitRate `mapstructure:"speed" yaml:"speed,omitempty"`
	// PVID is the VLAN of untagged and priority-tagged frames (default 1).
	PVID int `mapstructure:"pvid" yaml:"pvid,omitempty"`
	// VLANs, if not empty, are the only VLANs the port is a member of
	// (besides PVID); empty means every VLAN.
	VLANs    []int        `mapstructure:"vlans" yaml:"vlans,omitempty"`
	MaxFrame int          `mapstructure:"max-frame" yaml:"max-frame,omitempty"`
	Faults   FaultsConfig `mapstructure:"faults" yaml:"faults,omitempty"`
	// TrustPause makes the switch obey MAC Control frames (EtherType
	// 0x8808: 802.3x PAUSE, 802.1Qbb PFC) the port receives; an
	// untrusted port drops and counts them (drop reason mac-control).
	// Unset, a qemu-stream port (a stock guest's virtio-net, under the
	// guest's control) is untrusted and a seqpacket port (a device
	// backend, which filters its guests' PAUSE itself, or another
	// switch sending PFC) is trusted.
	TrustPause *bool `mapstructure:"trust-pause" yaml:"trust-pause,omitempty"`
}

// FaultsConfig injects faults into the frames a port receives; every
// probability is 0 by default. Seed makes a run repeatable.
type FaultsConfig struct {
	Drop      float64 `mapstructure:"drop" yaml:"drop,omitempty"`
	Duplicate float64 `mapstructure:"duplicate" yaml:"duplicate,omitempty"`
	Reorder   float64 `mapstructure:"reorder" yaml:"reorder,omitempty"`
	Corrupt   float64 `mapstructure:"corrupt" yaml:"corrupt,omitempty"`
	Seed      uint64  `mapstructure:"seed" yaml:"seed,omitempty"`
}

func (f FaultsConfig) enabled() bool {
	return f.Drop > 0 || f.Duplicate > 0 || f.Reorder > 0 || f.Corrupt > 0
}

// PortSocket is the socket path of port num of switch sw in runDir, when
// the port's config gives no Path: <switch>-port<N>.sock. Whatever starts
// a fabric and attaches to it (deploy) takes the path from here.
func PortSocket(runDir, sw string, num int) string {
	return filepath.Join(runDir, fmt.Sprintf("%s-port%d.sock", sw, num))
}

// LinkConfig joins two ports of switches of this process, each written
// "switch:port" (for example "tor1:10").
type LinkConfig struct {
	A string `mapstructure:"a" yaml:"a,omitempty"`
	B string `mapstructure:"b" yaml:"b,omitempty"`
}

// resolved settings, validated and with defaults filled in.

type switchSettings struct {
	name      string
	nodeGUID  uint64
	baseMAC   [6]byte
	aging     time.Duration
	fdbSize   int
	static    []staticEntry
	queues    QueueConfig
	pcpToTC   [8]uint8
	dscpToTC  [64]uint8
	strict    [NumTC]bool
	weights   [NumTC]int
	lossless  [NumTC]bool
	xoff, xon int64
	quanta    uint16
	ecn       ECNConfig
	ports     []portSettings
}

type staticEntry struct {
	mac  [6]byte
	vlan uint16
	port int
}

type portSettings struct {
	num      int
	link     string
	kind     string
	path     string
	dial     string
	tunnel   tunnelSettings // kind vxlan
	speed    BitRate
	pvid     uint16
	vlans    []uint16 // nil: all
	maxFrame int
	faults   FaultsConfig
	// trustPause: obey PAUSE/PFC received here (else drop them).
	trustPause bool
}

func (p *portSettings) member(vlan uint16) bool {
	if p.vlans == nil || vlan == p.pvid {
		return true
	}
	_, ok := slices.BinarySearch(p.vlans, vlan)
	return ok
}

// resolve validates c and fills in defaults.
func (c *Config) resolve() ([]switchSettings, error) {
	if c.RunDir == "" {
		c.RunDir = rundir.Default()
	}
	if c.Ports == 0 {
		c.Ports = DefaultPorts
	}
	if c.IOBatch <= 0 {
		c.IOBatch = DefaultIOBatch
	}
	if c.IOBatch > 256 {
		return nil, fmt.Errorf("io-batch %d: at most 256", c.IOBatch)
	}
	if c.PcapMax <= 0 {
		c.PcapMax = DefaultPcapMax
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.ShmMax <= 0 {
		c.ShmMax = DefaultShmMax
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	sws := c.Switches
	if len(sws) == 0 {
		sws = []SwitchConfig{{Name: DefaultSwitchName}}
	}
	out := make([]switchSettings, 0, len(sws))
	names := map[string]bool{}
	for i := range sws {
		s, err := c.resolveSwitch(&sws[i], i)
		if err != nil {
			return nil, err
		}
		if names[s.name] {
			return nil, fmt.Errorf("switch name %q used twice", s.name)
		}
		names[s.name] = true
		out = append(out, s)
	}
	paths, tunnels := map[string]string{}, map[string]string{}
	for _, s := range out {
		for _, p := range s.ports {
			if p.kind == KindVXLAN {
				id := fmt.Sprintf("%s:%d", s.name, p.num)
				key := p.tunnel.local + " " + p.tunnel.remote
				if other, ok := tunnels[key]; ok {
					return nil, fmt.Errorf("ports %s and %s are both vxlan links from %s to %s: one link per pair of addresses", other, id, p.tunnel.local, p.tunnel.remote)
				}
				tunnels[key] = id
				continue
			}
			if p.dial != "" {
				continue
			}
			id := fmt.Sprintf("%s:%d", s.name, p.num)
			if other, ok := paths[p.path]; ok {
				return nil, fmt.Errorf("ports %s and %s share socket path %s", other, id, p.path)
			}
			paths[p.path] = id
			if len(p.path) >= 108 {
				return nil, fmt.Errorf("port %s: socket path %s is %d bytes; UNIX socket paths must be shorter than 108: choose a shorter --run-dir", id, p.path, len(p.path))
			}
		}
	}
	return out, nil
}

func (c *Config) resolveSwitch(sc *SwitchConfig, idx int) (switchSettings, error) {
	s := switchSettings{name: sc.Name}
	if s.name == "" {
		s.name = DefaultSwitchName
		if idx > 0 {
			s.name = fmt.Sprintf("sw%d", idx)
		}
	}
	if strings.ContainsAny(s.name, "/: \t\n") {
		return s, fmt.Errorf("switch name %q: must not contain '/', ':' or spaces", s.name)
	}
	errf := func(format string, a ...any) (switchSettings, error) {
		return s, fmt.Errorf("switch %s: "+format, append([]any{s.name}, a...)...)
	}
	n := sc.Ports
	if n == 0 {
		n = c.Ports
	}
	if n < 1 || n > MaxPorts {
		return errf("ports %d: must be 1 to %d", n, MaxPorts)
	}
	s.nodeGUID = sc.NodeGUID
	h := fnv64(s.name)
	if s.nodeGUID == 0 {
		// 0x0002_C9 is not ours to use; HiNIC GUIDs carry the locally
		// administered bit like its MACs.
		s.nodeGUID = 0x0200_0000_0000_0000 | h&0x00FF_FFFF_FFFF_FF00
	}
	if sc.MAC != "" {
		hw, err := net.ParseMAC(sc.MAC)
		if err != nil || len(hw) != 6 {
			return errf("mac %q: not a MAC address", sc.MAC)
		}
		copy(s.baseMAC[:], hw)
	} else {
		s.baseMAC = [6]byte{0x02, 0x48, byte(h >> 24), byte(h >> 16), byte(h >> 8), 0}
	}
	s.aging = sc.Aging
	if s.aging == 0 {
		s.aging = DefaultAgingTime
	}
	if s.aging < 0 {
		return errf("aging %s: must be positive", s.aging)
	}
	s.fdbSize = sc.FDBSize
	if s.fdbSize == 0 {
		s.fdbSize = DefaultFDBSize
	}
	s.queues = sc.Queues
	if s.queues.Frames == 0 {
		s.queues.Frames = DefaultQueueFrames
	}
	if s.queues.Bytes == 0 {
		s.queues.Bytes = DefaultQueueBytes
	}
	if s.queues.Frames < 1 || s.queues.Frames > 1<<16 || s.queues.Bytes < 1 {
		return errf("queues: frames must be 1 to 65536 and bytes positive")
	}
	for i := range s.pcpToTC {
		s.pcpToTC[i] = uint8(i)
	}
	if len(sc.PCPToTC) > 0 {
		if len(sc.PCPToTC) != 8 {
			return errf("pcp-to-tc: need 8 entries, got %d", len(sc.PCPToTC))
		}
		for i, tc := range sc.PCPToTC {
			if tc < 0 || tc >= NumTC {
				return errf("pcp-to-tc[%d] = %d: classes are 0 to 7", i, tc)
			}
			s.pcpToTC[i] = uint8(tc)
		}
	}
	for d := range s.dscpToTC {
		s.dscpToTC[d] = uint8(d >> 3)
	}
	for k, tc := range sc.DSCPToTC {
		d, err := strconv.Atoi(k)
		if err != nil || d < 0 || d > 63 || tc < 0 || tc >= NumTC {
			return errf("dscp-to-tc %s: %d: DSCP is 0 to 63, class 0 to 7", k, tc)
		}
		s.dscpToTC[d] = uint8(tc)
	}
	strict := sc.Scheduler.Strict
	if strict == nil {
		strict = []int{6, 7}
	}
	for _, tc := range strict {
		if tc < 0 || tc >= NumTC {
			return errf("scheduler.strict: class %d: classes are 0 to 7", tc)
		}
		s.strict[tc] = true
	}
	for i := range s.weights {
		s.weights[i] = 1
	}
	if len(sc.Scheduler.Weights) > 0 {
		if len(sc.Scheduler.Weights) != NumTC {
			return errf("scheduler.weights: need 8 entries, got %d", len(sc.Scheduler.Weights))
		}
		for i, w := range sc.Scheduler.Weights {
			if w < 0 || w > 100 {
				return errf("scheduler.weights[%d] = %d: must be 0 to 100", i, w)
			}
			s.weights[i] = w
		}
	}
	for i := range s.weights {
		if !s.strict[i] && s.weights[i] == 0 {
			// A zero-weight ETS class would starve for ever; it still
			// gets the minimum.
			s.weights[i] = 1
		}
	}
	lossless := sc.PFC.Lossless
	if lossless == nil {
		lossless = []int{3}
	}
	for _, tc := range lossless {
		if tc == -1 {
			continue
		}
		if tc < 0 || tc >= NumTC {
			return errf("pfc.lossless: class %d: classes are 0 to 7", tc)
		}
		s.lossless[tc] = true
	}
	s.xoff, s.xon = int64(sc.PFC.XOFF), int64(sc.PFC.XON)
	if s.xoff == 0 {
		s.xoff = int64(DefaultXOFF)
	}
	if s.xon == 0 {
		s.xon = min(int64(DefaultXON), s.xoff/2)
	}
	if s.xon >= s.xoff || s.xon < 0 {
		return errf("pfc: xon (%d) must be below xoff (%d)", s.xon, s.xoff)
	}
	q := sc.PFC.Quanta
	if q == 0 {
		q = DefaultPauseQuanta
	}
	if q < 1 || q > 0xFFFF {
		return errf("pfc.quanta %d: must be 1 to 65535", q)
	}
	s.quanta = uint16(q)
	s.ecn = sc.ECN
	if s.ecn.KMin == 0 && s.ecn.KMax == 0 {
		s.ecn.KMin, s.ecn.KMax = DefaultECNKMin, DefaultECNKMax
	}
	if s.ecn.KMax < s.ecn.KMin {
		return errf("ecn: kmax (%d) below kmin (%d)", s.ecn.KMax, s.ecn.KMin)
	}
	if s.ecn.PMax == 0 {
		s.ecn.PMax = DefaultECNPMax
	}
	if s.ecn.PMax < 0 || s.ecn.PMax > 1 {
		return errf("ecn.pmax %g: must be 0 to 1", s.ecn.PMax)
	}
	if s.ecn.Seed == 0 {
		s.ecn.Seed = 1
	}

	maxFrame := sc.MaxFrame
	if maxFrame == 0 {
		maxFrame = DefaultMaxFrame
	}
	s.ports = make([]portSettings, n)
	for i := range s.ports {
		s.ports[i] = portSettings{
			num: i + 1, link: LinkEthernet, kind: KindSeqpacket,
			path:  PortSocket(c.RunDir, s.name, i+1),
			speed: DefaultSpeed, pvid: 1, maxFrame: maxFrame, trustPause: true,
		}
	}
	for _, pc := range sc.Port {
		if pc.Num < 1 || pc.Num > n {
			return errf("port num %d: ports are 1 to %d", pc.Num, n)
		}
		p := &s.ports[pc.Num-1]
		if err := applyPort(p, &pc); err != nil {
			return errf("port %d: %v", pc.Num, err)
		}
	}
	for _, st := range sc.Static {
		hw, err := net.ParseMAC(st.MAC)
		if err != nil || len(hw) != 6 {
			return errf("static entry %q: not a MAC address", st.MAC)
		}
		if st.Port < 1 || st.Port > n {
			return errf("static entry %s: port %d: ports are 1 to %d", st.MAC, st.Port, n)
		}
		vlan := st.VLAN
		if vlan == 0 {
			vlan = 1
		}
		if vlan < 1 || vlan > 4094 {
			return errf("static entry %s: vlan %d: must be 1 to 4094", st.MAC, vlan)
		}
		var e staticEntry
		copy(e.mac[:], hw)
		e.vlan, e.port = uint16(vlan), st.Port
		s.static = append(s.static, e)
	}
	return s, nil
}

func applyPort(p *portSettings, pc *PortConfig) error {
	switch pc.Link {
	case "", LinkEthernet:
	case LinkIB, "infiniband":
		p.link = LinkIB
	default:
		return fmt.Errorf("link %q: must be ethernet or ib", pc.Link)
	}
	switch pc.Kind {
	case "", KindSeqpacket:
	case KindQEMUStream, "stream":
		p.kind = KindQEMUStream
		if p.link != LinkEthernet {
			return fmt.Errorf("a qemu-stream port carries Ethernet only")
		}
	case KindVXLAN:
		p.kind = KindVXLAN
		t, err := resolveTunnel(pc, p.link)
		if err != nil {
			return err
		}
		p.tunnel = t
		// Pauses over the tunnel must outlast its refresh (tunnel.go).
		p.speed = DefaultTunnelSpeed
	default:
		return fmt.Errorf("kind %q: must be seqpacket, qemu-stream or vxlan", pc.Kind)
	}
	if p.kind != KindVXLAN && (pc.Remote != "" || pc.Local != "" || pc.VNI != 0) {
		return fmt.Errorf("remote, local and vni are for kind vxlan")
	}
	p.trustPause = p.kind != KindQEMUStream
	if pc.TrustPause != nil {
		p.trustPause = *pc.TrustPause
	}
	if pc.Path != "" {
		p.path = pc.Path
	}
	if pc.Dial != "" {
		if p.kind == KindVXLAN {
			return fmt.Errorf("a vxlan port does not dial: give remote")
		}
		// A seqpacket port dials another switch; a qemu-stream port
		// dials a QEMU -netdev stream,server=on socket.
		p.dial = pc.Dial
	}
	if pc.Speed < 0 {
		return fmt.Errorf("speed %d: must be positive", pc.Speed)
	}
	if pc.Speed > 0 {
		p.speed = pc.Speed
	}
	if pc.PVID != 0 {
		if pc.PVID < 1 || pc.PVID > 4094 {
			return fmt.Errorf("pvid %d: must be 1 to 4094", pc.PVID)
		}
		p.pvid = uint16(pc.PVID)
	}
	if len(pc.VLANs) > 0 {
		for _, v := range pc.VLANs {
			if v < 1 || v > 4094 {
				return fmt.Errorf("vlan %d: must be 1 to 4094", v)
			}
			p.vlans = append(p.vlans, uint16(v))
		}
		slices.Sort(p.vlans)
	}
	if pc.MaxFrame != 0 {
		p.maxFrame = pc.MaxFrame
	}
	if p.maxFrame < MinMaxFrame || p.maxFrame > 0xFFFF {
		return fmt.Errorf("max-frame %d: must be %d to 65535", p.maxFrame, MinMaxFrame)
	}
	f := pc.Faults
	for _, v := range []float64{f.Drop, f.Duplicate, f.Reorder, f.Corrupt} {
		if v < 0 || v > 1 {
			return fmt.Errorf("faults: probabilities are 0 to 1")
		}
	}
	p.faults = f
	return nil
}

func (p *portSettings) helloLink() proto.HelloLink {
	if p.link == LinkIB {
		return proto.HelloLinkInfiniBand
	}
	return proto.HelloLinkEthernet
}

// fnv64 is FNV-1a, used to derive stable identities from names.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// parsePortRef parses "switch:port".
func parsePortRef(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q: write switch:port, for example tor1:10", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("%q: port %q is not a number", s, s[i+1:])
	}
	return s[:i], n, nil
}
