package guestmem

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBelowFourG checks the split against device-facts §2.2's table
// (verified with QEMU 7.2.22).
func TestBelowFourG(t *testing.T) {
	const mib, gb = 1 << 20, 1 << 30
	for _, tc := range []struct {
		m     Machine
		ram   uint64
		below uint64
	}{
		{MachineQ35, 512 * mib, 512 * mib},
		{MachinePC, 1 * gb, 1 * gb},
		{MachineQ35, 2 * gb, 2 * gb},
		{MachinePC, 2 * gb, 2 * gb},
		{MachineQ35, 4 * gb, 0x80000000},
		{MachinePC, 4 * gb, 0xc0000000},
		{MachineQ35, 0xb0000000, 0x80000000},
		{MachineQ35, 0xafff0000, 0xafff0000},
		{MachinePC, 0xe0000000, 0xc0000000},
		{MachinePC, 0xd0000000, 0xd0000000},
	} {
		got, err := BelowFourG(tc.m, tc.ram)
		if err != nil || got != tc.below {
			t.Errorf("%s %#x: below_4g %#x, %v; want %#x", tc.m, tc.ram, got, err, tc.below)
		}
	}
	if _, err := BelowFourG("virt", 1<<30); err == nil {
		t.Error("unknown machine accepted")
	}
}

func TestGuestRAMTranslation(t *testing.T) {
	dir := t.TempDir()
	// q35 with 4 GiB: GPA 0x101b7b000 -> offset 0x81b7b000 (2 GiB below 4 GiB on q35).
	g, err := Open(filepath.Join(dir, "q35.ram"), 4<<30, MachineQ35)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pc, err := Open(filepath.Join(dir, "pc.ram"), 4<<30, MachinePC)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, tc := range []struct {
		name string
		g    *RAM
		gpa  uint64
		n    uint64
		off  uint64
		ok   bool
	}{
		{"q35 low", g, 0x297c000, 4096, 0x297c000, true},
		{"q35 high", g, 0x101b7b000, 4096, 0x81b7b000, true},
		{"pc high", pc, 0x101b73000, 4096, 0xc1b73000, true},
		{"q35 last low byte", g, 0x7fffffff, 1, 0x7fffffff, true},
		{"q35 hole", g, 0x80000000, 1, 0, false},
		{"q35 crosses into hole", g, 0x7ffff000, 0x2000, 0, false},
		{"q35 hole end", g, 0xffffffff, 1, 0, false},
		{"q35 last high byte", g, 0x17fffffff, 1, 0xffffffff, true},
		{"q35 past the end", g, 0x180000000, 1, 0, false},
		{"q35 crosses the end", g, 0x17ffff000, 0x2000, 0, false},
		{"wraps", g, ^uint64(0) - 10, 100, 0, false},
	} {
		off, err := tc.g.Offset(tc.gpa, tc.n)
		if tc.ok && (err != nil || off != tc.off) {
			t.Errorf("%s: %#x, %v; want %#x", tc.name, off, err, tc.off)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: offset %#x accepted", tc.name, off)
		}
		if err != nil && !errors.Is(err, ErrOutsideRAM) {
			t.Errorf("%s: error %v is not ErrOutsideRAM", tc.name, err)
		}
	}
	// Writes land at the translated offset and reads come back.
	if err := g.WriteAt([]byte("high"), 0x100000000); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if err := g.ReadAt(b, 0x100000000); err != nil || string(b) != "high" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if string(g.mem[0x80000000:0x80000004]) != "high" {
		t.Fatal("high GPA not at file offset below_4g")
	}
	if _, err := g.FetchAndAdd64(0x100000004, 1); !errors.Is(err, ErrUnaligned) {
		t.Errorf("unaligned atomic: %v", err)
	}
	if old, err := g.CompareAndSwap64(0x1000, 0, 5); err != nil || old != 0 {
		t.Errorf("CAS: %d, %v", old, err)
	}
	if old, _ := g.FetchAndAdd64(0x1000, 2); old != 5 {
		t.Errorf("FAA old %d", old)
	}
	if g.GPA(0x81b7b000) != 0x101b7b000 || g.GPA(0x1000) != 0x1000 {
		t.Error("GPA() is not the inverse of Offset()")
	}
}

func TestGuestRAMFileRules(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "small.ram")
	g, err := Open(p, 1<<20, MachinePC)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	// A non-empty file smaller than the RAM is refused, like QEMU's
	// "backing store size ... too small".
	if _, err := Open(p, 2<<20, MachinePC); err == nil {
		t.Error("short RAM file accepted")
	}
	// A larger one is used for its first size bytes.
	if g, err = Open(p, 512<<10, MachinePC); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if _, err := g.Offset(0, 1); err == nil {
		t.Error("access after Close accepted")
	}
}

// A guest's RAM file holds every byte of its memory: nobody but the
// backend's user (and QEMU, running as it) may read it.
func TestGuestRAMFilePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ram")
	g, err := Open(p, 1<<20, MachinePC)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("RAM file mode %04o, want 0600", m)
	}
}
