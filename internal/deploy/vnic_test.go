package deploy_test

import (
	"net/netip"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/device/serve"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/device"
)

// TestDeviceArgsParse feeds the rack's --vnic values to the parser of
// `hinic device serve`: what deploy writes is what the backend reads, and
// the backend's vNIC matches the guest's QEMU (RAM size, machine,
// vectors), and it pins the guest's data IP.
func TestDeviceArgsParse(t *testing.T) {
	r := &deploy.Rack{RunDir: "/tmp/hr", Guests: []deploy.Guest{
		{Name: "vm-a", NIC: deploy.NICHicain, Memory: 1536},
		{Name: "vm-b", NIC: deploy.NICHicain},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	args := deploy.DeviceArgs(r)
	var vnics []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--vnic" {
			vnics = append(vnics, args[i+1])
		}
	}
	if len(vnics) != 2 {
		t.Fatalf("%d --vnic in %q", len(vnics), args)
	}
	for i, s := range vnics {
		c, err := serve.ParseVNIC(s)
		if err != nil {
			t.Fatalf("--vnic %q: %v", s, err)
		}
		g := r.Guests[i]
		if c.Socket != deploy.IvshmemSocket(r, g) || c.RAMPath != deploy.GuestRAM(r, g) ||
			c.RAMSize != uint64(g.Memory)<<20 || c.Machine != deploy.QEMUMachine ||
			c.FabricPort != deploy.PortSocket(r, g.Switch, g.Port) || c.MTU != device.DefaultMTU ||
			c.Vectors != 8 || c.LinkLayer != "eth" || len(c.IPv4) != 1 || c.IPv4[0] != netip.MustParseAddr(g.IP) ||
			len(c.AllowedIPs) != 1 || c.AllowedIPs[0] != netip.PrefixFrom(c.IPv4[0], 32) {
			t.Errorf("vNIC %d: %+v", i, c)
		}
	}
}
