package ibsw

import (
	"errors"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
)

func TestNewConfig(t *testing.T) {
	ok := Config{NodeGUID: 1, NumPorts: 36}
	for _, c := range []struct {
		name string
		edit func(*Config)
	}{
		{"NodeGUID 0", func(c *Config) { c.NodeGUID = 0 }},
		{"no ports", func(c *Config) { c.NumPorts = 0 }},
		{"255 ports", func(c *Config) { c.NumPorts = 255 }},
		{"65-byte description", func(c *Config) { c.Description = strings.Repeat("x", 65) }},
		{"VendorID wider than an OUI", func(c *Config) { c.VendorID = 0x1000000 }},
		{"LinearFDBCap not whole blocks", func(c *Config) { c.LinearFDBCap = 100 }},
		{"LinearFDBCap beyond unicast LIDs", func(c *Config) { c.LinearFDBCap = 0xC040 }},
		{"MulticastFDBCap not whole blocks", func(c *Config) { c.MulticastFDBCap = 33 }},
		{"huge P_Key table", func(c *Config) { c.PartitionEnforcementCap = MaxPKeyTableSize + 1 }},
		{"MTUCap 6", func(c *Config) { c.MTUCap = 6 }},
		{"VLCap 6", func(c *Config) { c.VLCap = 6 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			if _, err := New(cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
		})
	}
	s, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumPorts() != 36 || s.LID() != 0 || s.positions != 3 || len(s.lft) != DefaultLinearFDBCap {
		t.Errorf("defaults: %d ports, LID %d, %d MFT positions, LFT %d", s.NumPorts(), s.LID(), s.positions, len(s.lft))
	}
	snap := s.Snapshot()
	if len(snap.Ports) != 37 || snap.Ports[0].State != proto.PortStateActive || snap.Ports[36].State != proto.PortStateDown ||
		len(snap.LFT) != 1 || snap.LFT[0] != proto.LFTPortDrop || snap.MFT != nil {
		t.Errorf("new switch snapshot: %+v", snap)
	}
}

func TestIngressOnPortsWithoutLink(t *testing.T) {
	s := newTestSwitch(t, 4)
	pkt := drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 1, hp: 1, initial: []byte{1}})
	for _, in := range []int{-1, 0, 5} {
		if out := ingress(s, in, pkt); len(out) != 0 {
			t.Errorf("port %d: answered", in)
		}
	}
	if out := ingress(s, 2, pkt); len(out) != 0 {
		t.Errorf("port without a link answered")
	}
	d := s.Snapshot().Drops
	if d.BadPort != 3 || d.LinkDown != 1 {
		t.Errorf("drops %+v", d)
	}
}

func TestStateNames(t *testing.T) {
	if PortStateName(proto.PortStateArmed) != "Armed" || PortStateName(9) != "Reserved" ||
		PhysStateName(proto.PortPhysStateLinkUp) != "LinkUp" || PhysStateName(9) != "Reserved" {
		t.Error("names")
	}
}
