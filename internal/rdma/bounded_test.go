package rdma_test

import (
	"errors"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// holeyMemory is host memory with a hole, like guest RAM around the PCI
// hole: [0, 64 KiB) and [1 MiB, 1 MiB + 64 KiB) are backed.
type holeyMemory struct{ *rdma.HostMemory }

func (m holeyMemory) Contains(addr, n uint64) bool {
	in := func(lo, hi uint64) bool { return addr >= lo && addr+n >= addr && addr+n <= hi }
	return in(0, 64<<10) || in(1<<20, 1<<20+64<<10)
}

func TestRegMRRespectsHoles(t *testing.T) {
	mem := holeyMemory{rdma.NewHostMemory(2 << 20)}
	d, err := rdma.NewDevice(rdma.DeviceConfig{Name: "holey", MAC: [6]byte{2, 0, 0, 0, 0, 9}, Memory: mem}, discardPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegMRPages(pd, 0, 8192, 4096, []uint64{0, 1 << 20}, rdma.AccessLocalWrite); err != nil {
		t.Fatalf("pages on both sides of the hole: %v", err)
	}
	if _, err := d.RegMRPages(pd, 0, 8192, 4096, []uint64{0, 512 << 10}, rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("a page in the hole: %v, want ErrInvalid", err)
	}
	if _, err := d.RegMR(pd, 60<<10, 8<<10, rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("a contiguous region across the hole: %v, want ErrInvalid", err)
	}
}

type discardPort struct{}

func (discardPort) Send([]byte) error { return nil }
