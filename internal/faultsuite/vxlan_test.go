package faultsuite

import (
	"context"
	"testing"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/testutil"
)

// TestFaultSuiteAcrossVXLAN runs the suite with the specification's fault
// rates between two hosts on two racks, each in its own network
// namespace, joined by a VXLAN link over a veth pair: every operation
// crosses the tunnel, and every check holds as on one switch.
func TestFaultSuiteAcrossVXLAN(t *testing.T) {
	nsp := testutil.NewNetnsPair(t)
	const uplink = 10
	racks := func(ctx context.Context, base rack.Config) ([]*rack.Rack, error) {
		var out []*rack.Rack
		for i := range 2 {
			c := base
			c.Hosts, c.HostBase, c.DialTunnel = 1, i, testutil.DialIn(nsp.NS[i])
			c.Uplinks = []fabric.PortConfig{{Num: uplink, Kind: fabric.KindVXLAN, VNI: 77,
				Local: nsp.Addr[i], Remote: nsp.Addr[1-i]}}
			r, err := rack.Start(ctx, c)
			if err != nil {
				for _, o := range out {
					o.Close()
				}
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	runFaulty(t, Config{Hosts: 2, Ops: testOps(), Seed: 3, Faults: SpecFaults(), Timeout: testTimeout(), Racks: racks})
}
