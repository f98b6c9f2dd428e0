package device_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
)

// The tests of package device reach the backend through the guest
// simulator only; the ones that need a fabric or QEMU too are in
// internal/device/integration. These need device's own hooks
// (export_test.go), which only this package's tests can see.

// startOne starts one vNIC with no fabric port (its link stays down) and
// a simulated guest that finished the handshake.
func startOne(t *testing.T) (*device.Server, *guestsim.Guest, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	c := device.VNICConfig{
		Name:    "vm1/hicain0",
		Socket:  filepath.Join(dir, "ivshmem1.sock"),
		RAMPath: filepath.Join(dir, "vm1.ram"),
		RAMSize: 64 << 20,
		Machine: device.MachineQ35,
		MAC:     [6]byte{0x02, 0x48, 0x4e, 0, 0, 1},
		IPv4:    []netip.Addr{netip.AddrFrom4([4]byte{10, 42, 0, 1})},
	}
	srv, err := device.Start(ctx, device.Config{VNICs: []device.VNICConfig{c}, Control: filepath.Join(dir, "device.sock")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	g, err := guestsim.Connect(ctx, guestsim.Config{Socket: c.Socket, RAMPath: c.RAMPath, RAMSize: c.RAMSize, Machine: c.Machine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, g, ctx
}

// ahAttr is an address handle to a RoCEv2 peer on the test subnet.
func ahAttr() device.AHAttr {
	return device.AHAttr{IsGlobal: 1, PortNum: 1, SGIDIndex: 1, HopLimit: 64,
		DGID: netip.AddrFrom4([4]byte{10, 42, 0, 2}).As16(), DMAC: [6]byte{0x02, 0x48, 0x4e, 0, 0, 2}}
}

// TestHandlesDoNotWrap: the AH and CQ handle counters wrap after 2^32
// creations. Before, the next handle after the wrap was 0 and then the
// handle of a live object, whose entry the new object replaced: the
// guest's first AH and CQ became another's, and the old ones leaked.
func TestHandlesDoNotWrap(t *testing.T) {
	srv, g, ctx := startOne(t)
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ah1, err := g.CreateAH(ctx, pd, ahAttr())
	if err != nil {
		t.Fatal(err)
	}
	cq1, err := g.CreateCQ(ctx, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	device.SetNextHandles(srv, 0, 0xffffffff, 0xffffffff)
	seenAH := map[uint32]bool{ah1: true}
	seenCQ := map[uint32]bool{cq1.CQN: true}
	for range 3 {
		ah, err := g.CreateAH(ctx, pd, ahAttr())
		if err != nil {
			t.Fatal(err)
		}
		cq, err := g.CreateCQ(ctx, 16, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ah == 0 || seenAH[ah] || cq.CQN == 0 || seenCQ[cq.CQN] {
			t.Fatalf("after the wrap: AH %d, CQ %d; handles held %v, %v", ah, cq.CQN, seenAH, seenCQ)
		}
		seenAH[ah], seenCQ[cq.CQN] = true, true
	}
	// Every handle names its own object: each destroys once.
	for ah := range seenAH {
		if err := g.Destroy(ctx, device.CmdDestroyAH, ah); err != nil {
			t.Fatalf("DESTROY_AH %d: %v", ah, err)
		}
	}
	for cq := range seenCQ {
		if err := g.Destroy(ctx, device.CmdDestroyCQ, cq); err != nil {
			t.Fatalf("DESTROY_CQ %d: %v", cq, err)
		}
	}
}
