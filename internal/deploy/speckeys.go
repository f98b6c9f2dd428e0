package deploy

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/hilink"
)

// SpecKey documents one key of a rack spec. SpecKeys is the one source
// the rack spec's JSON Schema (hinic deploy schema), the loader's checks
// (enums, with file and line) and docs/deploy.md's key table are made
// from; a test checks that it covers every field of Rack.
type SpecKey struct {
	// Path is the key's place: "name", "guests[].nic",
	// "guests[].gpus.count".
	Path    string
	Default string // as docs/deploy.md shows it; "" for none
	Desc    string // one paragraph, Markdown
	// Enum lists the values a string key takes; Aliases are more the
	// loader accepts for them (the schema accepts both).
	Enum    []string
	Aliases []string
	// Pattern is a regular expression a string key matches (the
	// schema's, checked by the loader too).
	Pattern string
	// Min and Max bound an integer key when Bounded.
	Bounded  bool
	Min, Max int
}

// SpecKeys are the keys of a rack spec, in the order docs/deploy.md
// lists them.
var SpecKeys = []SpecKey{
	{Path: "name", Default: "`rack0`", Desc: "rack name"},
	{Path: "run-dir", Default: "`/tmp/hinic-rack-NAME`", Desc: "state, logs, sockets; keep it short (UNIX sockets < 108 bytes)"},
	{Path: "image", Default: "`.cache/images/hinic-guest`", Desc: "image directory of `hinic image build`"},
	{Path: "network", Default: "`10.42.0.0/24`", Desc: "data network, an IPv4 prefix"},
	{Path: "ssh-port-base", Default: "2222", Desc: "guest N's SSH on `127.0.0.1:base+N-1` (on its host's `address` in a rack with `hosts`)", Bounded: true, Min: 0, Max: 65535},
	{Path: "accel", Default: "`auto`", Desc: "`tcg`, `kvm`, or `auto`: KVM only when the KVM probe passes (see [Accelerator](#accelerator)), else TCG. `kvm` on a host where the probe fails is refused before anything starts",
		Enum: []string{accel.TCG, accel.KVM, accel.Auto}},
	{Path: "pcap", Default: "false", Desc: "capture every fabric port to `RUN-DIR/pcap`"},
	{Path: "boot-timeout", Default: "`300s`", Desc: "launch to SSH, per guest: a Go duration (`90s`, `5m`)", Pattern: durationPattern},
	{Path: "mtu", Default: "0 (1500)", Desc: "data NIC MTU (rxe's active MTU is netdev MTU − 80, rounded down to an IB MTU: 1500 gives 1024, 4176 and more 4096). With hicain guests 256 to 9000 (the netdev's limit, the device header's `max_mtu`); it also sets the vNICs' path MTU limit (`mtu=` of `device serve`) to the RoCE MTU the netdev MTU leaves after the RoCEv2 headers (96 bytes, ib_core's `iboe_get_mtu`, which hicain_ib applies too): 1500 (and 0) give 1024, 4096 gives 2048, 4192 and more 4096. That is the active MTU the guests show, and the SSH gate checks it in its `ibv_devinfo` case. The racks of `make e2e` use 9000, so both NICs run at the RoCE MTU 4096",
		Bounded: true, Min: 0, Max: 65535},
	{Path: "procs", Default: "1", Desc: "`GOMAXPROCS` of the rack's daemons (fabric, device and GPU backends), over any in the environment. With one, the thread a frame or a doorbell wakes does the work; each more lets the Go runtime wake idle threads, a thread switch each, which on a host whose CPUs the vCPUs keep busy is latency (docs/device.md). Raise it for many guests on a host with cores to spare",
		Bounded: true, Min: 0, Max: 1 << 16},
	{Path: "daemons", Default: "`joined`", Desc: "with hicain guests, `joined` runs the fabric inside the device backend (`hinic device serve --fabric`): a frame from one vNIC crosses the switch to another on the thread that sent it, where two processes cost a thread switch per hop. Per `ib_send_lat` round trip the rack's daemons went from about 17 thread time slices to 6 (docs/device.md). `split` runs `hinic fabric serve` and `hinic device serve` apart, so that either can be restarted alone (`deploy restart fabric` on a joined rack restarts the backend). A rack without hicain guests has the fabric alone either way",
		Enum: []string{DaemonsJoined, DaemonsSplit}},
	{Path: "hosts", Default: "none (this machine)", Desc: "the machines the rack spans ([Across hosts](#across-hosts)): each runs its switches' fabric, device backend and guests; a link between switches of two hosts is a VXLAN link between their addresses. One host places the whole rack on it"},
	{Path: "hosts[].name", Desc: "host name, unique, without '/', ':' or spaces; `switches[].host` and `guests[].host` name it"},
	{Path: "hosts[].address", Desc: "the host's IP address on the underlay: its VXLAN links bind it, and its guests' SSH forwards listen on it (`address:ssh-port`)"},
	{Path: "hosts[].netns", Default: "none", Desc: "a network namespace of this machine that stands in for the host (`ip netns add`): its fabric, backends and QEMUs run in it (`ip netns exec`), and deploy reaches its guests by opening sockets in it. Needs root. Without it the host is a machine: another one reached over `ssh`, else this one when deploy runs every host (at most one host may lack both `netns` and `ssh` then), else the machine that deploys its part with `deploy rack --host NAME`"},
	{Path: "hosts[].libvirt", Default: "none", Desc: "a libvirt connection URI, `qemu:///system` or `qemu+ssh://[USER@]HOST/system` (also `qemu+unix`, `qemu+tcp`, `qemu+tls`; `/session` for a user's libvirtd): the host's guests are defined and started as libvirt domains `hinic-RACK-GUEST` through `virsh -c URI` ([Through libvirt](#through-libvirt)), and on a host that runs systemd its fabric and device backend run as the host package's units `hinic-fabric@` and `hinic-device@`. Not with `netns`. Without it deploy runs QEMU itself"},
	{Path: "hosts[].ssh", Default: "none", Desc: "another machine, `[USER@]HOST[:PORT]`, that the machine running `deploy rack` reaches with the system `ssh` client in batch mode (the user's `~/.ssh/config`, agent and `known_hosts` apply; `HINIC_SSH` replaces the `ssh` command): deploy copies the rack's key and spec there and runs that machine's `hinic deploy rack --host NAME`, and `status`, `exec`, `down` and the gate reach its part from here ([Across hosts](#across-hosts)). Not with `netns`; with `libvirt` only a local URI (`qemu:///system`)"},
	{Path: "hosts[].hinic", Default: "`hinic`", Desc: "the hinic binary on an `ssh` host (on the remote user's `PATH` by default)"},
	{Path: "hosts[].run-dir", Default: "the rack's `run-dir`", Desc: "the rack's run directory on an `ssh` host, an absolute path: its part is in `RUN-DIR/NAME` there"},
	{Path: "switches", Default: "`sw0`, 10 ports", Desc: "the rack's HiSwitches"},
	{Path: "switches[].name", Desc: "switch name, which guests' `switch` and links name"},
	{Path: "switches[].ports", Default: "10", Desc: "port count, ports 1 to N", Bounded: true, Min: 0, Max: 4096},
	{Path: "switches[].hilink", Default: "`hl-NAME`, 8 ports", Desc: "the rack's HiLink switch ([HiLink](#hilink)): every HiSwitch is the TOR of one rack, and its HiLink switch runs (`hinic link serve`) when a GPU of the rack cables to it"},
	{Path: "switches[].hilink.name", Default: "`hl-NAME`", Desc: "HiLink switch name, unique among the switches, which guests' `gpus.hilink` names"},
	{Path: "switches[].hilink.ports", Default: "8", Desc: "HiLink ports 0 to N-1, at most 64", Bounded: true, Min: 0, Max: hilink.MaxPorts},
	{Path: "switches[].host", Default: "the first host", Desc: "the host the switch runs on; only with `hosts`"},
	{Path: "guests", Default: "`vm-a`, `vm-b`", Desc: "the QEMU guests"},
	{Path: "guests[].name", Default: "`vm-N`", Desc: "guest name, unique, without '/', ':' or spaces"},
	{Path: "guests[].memory", Default: "1024", Desc: "RAM in MiB", Bounded: true, Min: 0, Max: 1 << 20},
	{Path: "guests[].cpus", Default: "1", Desc: "virtual CPUs", Bounded: true, Min: 0, Max: 256},
	{Path: "guests[].image", Default: "the rack's `image`", Desc: "the guest's image directory"},
	{Path: "guests[].nic", Default: "`rxe`", Desc: "the data NIC: `rxe` (Soft-RoCE over virtio-net) or `hicain` (the HiNIC vNIC of `hinic device serve`)",
		Enum: []string{NICRxe, NICHicain}},
	{Path: "guests[].link", Default: "`eth`", Desc: "link layer: `eth` (RoCEv2), or `ib` for a hicain NIC: native InfiniBand (`ethernet` and `infiniband` are accepted too)",
		Enum: []string{LinkEth, LinkIB}, Aliases: []string{"ethernet", "infiniband"}},
	{Path: "guests[].ip", Default: "`.N` of `network`", Desc: "data IP, in `network`; the IPoIB address of an `ib` guest"},
	{Path: "guests[].mac", Default: "`52:54:00:42:00:NN`", Desc: "data NIC's MAC"},
	{Path: "guests[].switch", Default: "the first switch", Desc: "the switch the data NIC is on"},
	{Path: "guests[].port", Default: "next free", Desc: "the switch port the data NIC is on", Bounded: true, Min: 0, Max: 4096},
	{Path: "guests[].ssh-port", Default: "`ssh-port-base`+N-1", Desc: "management SSH port on 127.0.0.1 (on the host's `address` in a rack with `hosts`)", Bounded: true, Min: 0, Max: 65535},
	{Path: "guests[].host", Default: "its switch's host", Desc: "the host the guest runs on: its switch's, which it may name again; only with `hosts`"},
	{Path: "guests[].debs", Desc: "`.deb` files copied to the guest and installed with `dpkg -i`; then every kernel module they ship that the guest has loaded (the image's own copy, loaded at boot) is unloaded, dependents first, so that the data NIC's and GPUs' set-up loads the new one; a module still in use fails the deploy with its name"},
	{Path: "guests[].files", Desc: "files copied to the guest, `LOCAL:REMOTE`", Pattern: `^[^:]+:.+$`},
	{Path: "guests[].trust-pause", Default: "false", Desc: "false: the guest's PAUSE/PFC frames are dropped and counted; true sets `trust-pause` on its switch port for rxe, on its vNIC for hicain"},
	{Path: "guests[].gpus", Default: "none", Desc: "the guest's HiGPUs ([GPUs](#gpus)), block or flow form"},
	{Path: "guests[].gpus.count", Default: "0", Desc: "the guest's HiGPUs, 0 to 8: ivshmem-doorbell functions served by the rack's `hinic gpu serve` ([GPUs](#gpus))",
		Bounded: true, Min: 0, Max: MaxGuestGPUs},
	{Path: "guests[].gpus.memory", Default: "256", Desc: "device memory per GPU, MiB, 32 to 65536 (the gate's hicart_bandwidth allocates two 8 MiB buffers; an anonymous memfd in the backend, so only what the guest touches costs host memory). Only with `count`",
		Bounded: true, Min: 0, Max: MaxGPUMemory},
	{Path: "guests[].gpus.ids", Default: "`[0, ..., count-1]`", Desc: "the GPUs' `gpu_id`s, unique, 0 to 7, one per GPU: `/dev/higpu<id>` in the guest, and the device address range (`(id+1)` TiB) of each. Only with `count`",
		Bounded: true, Min: 0, Max: MaxGuestGPUs - 1},
	{Path: "guests[].gpus.hilink", Default: "the rack's", Desc: "the HiLink switch the GPUs cable to: that of the guest's rack (its `switch`), or `none` for no HiLink port. A HiLink switch of another rack is refused: HiLink is rack-local ([HiLink](#hilink)). Only with `count`"},
	{Path: "guests[].gpus.hilink-ports", Default: "the next free", Desc: "the GPUs' HiLink ports, one per GPU in the order of `ids`, each used once. Only with `count`",
		Bounded: true, Min: 0, Max: hilink.MaxPorts - 1},
	{Path: "links", Default: "none", Desc: "inter-switch cables `{a: \"sw0:10\", b: \"sw1:10\"}`; a cable between switches of `ib` guests is an InfiniBand link, any other an Ethernet link (RoCEv2 crosses it)"},
	{Path: "links[].a", Desc: "one end, `SWITCH:PORT`", Pattern: linkEndPattern},
	{Path: "links[].b", Desc: "the other end, `SWITCH:PORT`; none for a link with `remote`", Pattern: linkEndPattern},
	{Path: "links[].remote", Default: "none", Desc: "makes the link a VXLAN link from `a` to the switch of a rack on another host (docs/fabric.md, \"Two hosts\"): that host's address, `host` or `host:port` (port 4789; 4792 for an `ib` link, IB-over-UDP)"},
	{Path: "links[].local", Default: "every address", Desc: "the address a `remote` link binds on this host, `host` or `host:port`"},
	{Path: "links[].vni", Desc: "the VXLAN network identifier of a `remote` link, 1 to 16777215, the same in both racks' specs; also of a link between switches on two `hosts`, which is a VXLAN link between their addresses",
		Bounded: true, Min: 0, Max: 1<<24 - 1},
	{Path: "metrics", Default: "none", Desc: "`host:port` (`127.0.0.1:9464`): the rack's `fabric serve` serves Prometheus metrics there, its `device serve` on the next port and its `gpu serve` on the one after (`--metrics`, docs/metrics.md); with `daemons: joined` the device backend's endpoint has the fabric's metrics too",
		Pattern: `^(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]*):[0-9]{1,5}$`},
	{Path: "opensm", Default: "the first `ib` guest", Desc: "the guest that runs the subnet manager (Debian's `opensm`, in the image); `none` starts none (one runs elsewhere on the subnet). Only with `ib` guests"},
}

const (
	durationPattern = `^(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	linkEndPattern  = `^[^:]+:[0-9]+$`
)

// specKey returns the documentation of the key at path ("guests[].nic").
func specKey(path string) (SpecKey, bool) {
	for _, k := range SpecKeys {
		if k.Path == path {
			return k, true
		}
	}
	return SpecKey{}, false
}

// specField is a field of a spec type as YAML names it.
type specField struct {
	Name  string // the YAML key
	Index int
	Type  reflect.Type
}

// specFields returns the YAML keys of struct type t, in field order.
func specFields(t reflect.Type) []specField {
	var out []specField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out = append(out, specField{Name: name, Index: i, Type: f.Type})
	}
	return out
}

// specKind is what a field's YAML node must be.
type specKind int

const (
	kindString specKind = iota
	kindInt
	kindBool
	kindDuration
	kindList
	kindMap
)

var durationType = reflect.TypeFor[Duration]()

func kindOf(t reflect.Type) specKind {
	switch {
	case t == durationType:
		return kindDuration
	case t.Kind() == reflect.Struct:
		return kindMap
	case t.Kind() == reflect.Slice:
		return kindList
	case t.Kind() == reflect.Int:
		return kindInt
	case t.Kind() == reflect.Bool:
		return kindBool
	case t.Kind() == reflect.String:
		return kindString
	}
	panic(fmt.Sprintf("deploy: rack spec field of type %s", t))
}
