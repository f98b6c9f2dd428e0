package deploy

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/PacketFive/hinic/internal/fabric"
)

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
				for _, end := range []string{l.A, l.B} {
					sw, num, _ := strings.Cut(end, ":")
					if n, err := strconv.Atoi(num); err == nil && sw == s.Name {
						x.Port = append(x.Port, port{Num: n, Link: fabric.LinkIB})
					}
				}
			}
		}
		c.Switches = append(c.Switches, x)
	}
	for _, l := range r.Links {
		c.Links = append(c.Links, link(l))
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
