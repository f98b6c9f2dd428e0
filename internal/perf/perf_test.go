package perf

import (
	"context"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/rack"
)

func TestPatternDetectsCorruption(t *testing.T) {
	b := make([]byte, 4096)
	fillPattern(b, 3)
	want := patternCRC(4096, 3)
	if patternCRC(4096, 4) == want {
		t.Fatal("two seeds give the same pattern")
	}
	b[1000] ^= 1
	if crc32.ChecksumIEEE(b) == want {
		t.Fatal("a flipped bit went unnoticed")
	}
}

// TestCheckSlotCatchesWrongData writes the wrong pattern into a slot and
// expects the check the bandwidth workloads rely on to fail.
func TestCheckSlotCatchesWrongData(t *testing.T) {
	r, err := rack.Start(context.Background(), rack.Config{Hosts: 2, MemSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := connect(r.Hosts[0], r.Hosts[1], slots*1024)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if err := fillSlots(p.s, 1024); err != nil {
		t.Fatal(err)
	}
	crcs, scratch := slotCRCs(1024), make([]byte, 1024)
	if err := checkSlot(p.s, 1024, 5, 5, crcs, scratch); err != nil {
		t.Fatalf("good slot: %v", err)
	}
	if err := checkSlot(p.s, 1024, 5, 6, crcs, scratch); err == nil || !strings.Contains(err.Error(), "data check failed") {
		t.Fatalf("wrong data not caught: %v", err)
	}
}

func TestBenchSmall(t *testing.T) {
	rep, err := Bench(context.Background(), BenchConfig{Sizes: []int{4096}, Bytes: 4 << 20, LatSizes: []int{2}, LatIters: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 11 || rep.Raw.Frames != 1024 || rep.Raw.MiBps <= 0 {
		t.Fatalf("%+v", rep)
	}
	for _, r := range rep.Rows[:3] {
		if r.MiBps <= 0 || r.VsRaw <= 0 {
			t.Errorf("%+v", r)
		}
	}
	for _, r := range []BenchRow{rep.Rows[3], rep.Rows[4], rep.Rows[5], rep.Rows[7]} {
		if r.Typical <= 0 || r.P99 < r.Typical {
			t.Errorf("%+v", r)
		}
	}
	if r := rep.Rows[6]; r.Test != "ib_atomic_bw" || r.OpsPerS <= 0 {
		t.Errorf("%+v", r)
	}
}
