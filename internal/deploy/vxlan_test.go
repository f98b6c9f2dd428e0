package deploy

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/PacketFive/hinic/internal/fabric"
)

// TestRemoteLinkSpec reads host A's half of a two-host rack: its link
// with remote becomes a vxlan port of the fabric config, which the
// fabric accepts.
func TestRemoteLinkSpec(t *testing.T) {
	r, err := ReadRack("../../testdata/racks/vxlan-host-a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = "/tmp/x"
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Fabric struct {
			Switches []struct {
				Name  string              `yaml:"name"`
				Ports int                 `yaml:"ports"`
				Port  []fabric.PortConfig `yaml:"port"`
			} `yaml:"switches"`
			Links []struct{ A, B string } `yaml:"links"`
		} `yaml:"fabric"`
	}
	if err := yaml.Unmarshal(FabricConfig(r), &doc); err != nil {
		t.Fatal(err)
	}
	f := doc.Fabric
	if len(f.Links) != 0 || len(f.Switches) != 1 || len(f.Switches[0].Port) != 2 {
		t.Fatalf("fabric %+v", f)
	}
	p := f.Switches[0].Port[1]
	if p.Num != 10 || p.Kind != fabric.KindVXLAN || p.Remote != "192.0.2.2" || p.Local != "192.0.2.1" || p.VNI != 4242 || p.Link != "" {
		t.Fatalf("vxlan port %+v", p)
	}
	sc := fabric.SwitchConfig{Name: f.Switches[0].Name, Ports: f.Switches[0].Ports, Port: f.Switches[0].Port}
	if _, err := fabric.New(fabric.Config{RunDir: t.TempDir(), Switches: []fabric.SwitchConfig{sc}}); err != nil {
		t.Fatalf("the fabric refuses the config: %v", err)
	}

	// On a switch of ib guests the link is an IB-over-UDP link.
	r.Guests[0].Link = LinkIB
	if err := yaml.Unmarshal(FabricConfig(r), &doc); err != nil {
		t.Fatal(err)
	}
	if p := doc.Fabric.Switches[0].Port[1]; p.Kind != fabric.KindVXLAN || p.Link != fabric.LinkIB {
		t.Fatalf("ib rack's vxlan port %+v", p)
	}
}

func TestRemoteLinkErrors(t *testing.T) {
	sw := []Switch{{Name: "sw0", Ports: 10}}
	g := []Guest{{Name: "a", NIC: NICHicain}}
	for name, tc := range map[string]struct {
		l    Link
		want string
	}{
		"no remote":    {Link{A: "sw0:10", VNI: 3}, "needs remote"},
		"with b":       {Link{A: "sw0:10", B: "sw1:10", Remote: "h", VNI: 3}, "has no b"},
		"no vni":       {Link{A: "sw0:10", Remote: "h"}, "needs a vni"},
		"vni too big":  {Link{A: "sw0:10", Remote: "h", VNI: 1 << 24}, "needs a vni"},
		"no switch":    {Link{A: "sw9:10", Remote: "h", VNI: 3}, "no switch sw9"},
		"port range":   {Link{A: "sw0:11", Remote: "h", VNI: 3}, "ports 1 to 10"},
		"guest's port": {Link{A: "sw0:1", Remote: "h", VNI: 3}, "guest a is on that port"},
	} {
		t.Run(name, func(t *testing.T) {
			r := Rack{Switches: sw, Guests: g, Links: []Link{tc.l}}
			if err := r.Defaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
