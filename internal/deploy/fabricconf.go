package deploy

import (
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/PacketFive/hinic/internal/fabric"
)

// FabricSettings is the fabric of the rack, as `hinic fabric serve`
// runs it: the port of an rxe guest is a qemu-stream port that dials the
// guest's QEMU (-netdev stream,server=on at StreamSocket), the port of a
// hicain guest a seqpacket port (the device backend's). The switch dials
// QEMU, and not the other way round, so that a restarted fabric reaches
// every running guest again: QEMU 7.2's stream client has no reconnect,
// but its server takes a new client once the last one has left.
func FabricSettings(r *Rack) fabric.Config {
	// No side of a shared-memory port polls (the backends' links,
	// the inter-switch links in the process): the daemons share the
	// host's CPUs with the guests' vCPUs, and a side that polls takes
	// the CPU from the one that would fill its ring.
	c := fabric.Config{RunDir: filepath.Join(r.RunDir, DirFabric), ShmNoPoll: true}
	if r.Pcap {
		c.Pcap = filepath.Join(r.RunDir, DirPcap)
	}
	trusted := true
	for _, s := range r.Switches {
		x := fabric.SwitchConfig{Name: s.Name, Ports: s.Ports}
		for _, g := range r.Guests {
			if g.Switch != s.Name {
				continue
			}
			kind := fabric.KindQEMUStream
			if g.NIC == NICHicain {
				kind = fabric.KindSeqpacket
			}
			pc := fabric.PortConfig{Num: g.Port, Kind: kind}
			// A hicain guest's frames pass its vNIC's filter first
			// (DeviceArgs); the seqpacket port trusts the backend.
			// Unset, each kind keeps its default.
			if g.TrustPause && kind == fabric.KindQEMUStream {
				pc.TrustPause = &trusted
			}
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
						x.Port = append(x.Port, fabric.PortConfig{Num: n, Link: fabric.LinkIB})
					}
				}
			}
		}
		// A link to a rack on another host is a vxlan port.
		for _, l := range r.Links {
			if n, ok := l.remotePort(s.Name); ok {
				pc := fabric.PortConfig{Num: n, Kind: fabric.KindVXLAN, Remote: l.Remote, Local: l.Local, VNI: l.VNI}
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
			c.Links = append(c.Links, fabric.LinkConfig{A: l.A, B: l.B})
		}
	}
	return c
}

// FabricConfig is the `hinic fabric serve --config` file of the rack:
// FabricSettings under the "fabric" key, with the rack's metrics
// address beside it (a setting of the command, not of the fabric).
func FabricConfig(r *Rack) []byte {
	var doc struct {
		fabric.Config `yaml:",inline"`
		Metrics       string `yaml:"metrics,omitempty"`
	}
	doc.Config = FabricSettings(r)
	doc.Metrics, _, _ = MetricsAddrs(r)
	b, err := yaml.Marshal(map[string]any{"fabric": doc})
	if err != nil {
		// Every field is a plain value the encoder takes.
		panic("deploy: marshalling the fabric config: " + err.Error())
	}
	return append([]byte("# Written by hinic deploy rack.\n"), b...)
}

// StreamSocket is the socket of an rxe guest's data NIC: its QEMU's
// -netdev stream,server=on listens there and the guest's switch port
// dials it. It sits beside the port's own socket path (with .qemu.sock
// for .sock), which a dialling port does not use.
func StreamSocket(r *Rack, g Guest) string {
	return strings.TrimSuffix(PortSocket(r, g.Switch, g.Port), ".sock") + ".qemu.sock"
}

// PortSocket is the socket path of a switch port of the rack's fabric:
// fabric.PortSocket in its run directory.
func PortSocket(r *Rack, sw string, port int) string {
	return fabric.PortSocket(filepath.Join(r.RunDir, DirFabric), sw, port)
}
