package rdma_test

import (
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestMRKeysUnpredictable: the low byte of an MR's keys is random, and
// never the one its slot had before. Before, it was a device-wide
// counter: each registration's key was the previous one + 1, so a guest
// that registered an MR knew the R_Key of the next one registered.
func TestMRKeysUnpredictable(t *testing.T) {
	p := newPair(t, pairOpts{})
	d, pd := p.a.dev, p.a.pd
	const n = 64
	// Each MR is deregistered before the next is registered: the next
	// takes its slot.
	var prev uint32
	steps := 0
	for i := range n {
		mr, err := d.RegMR(pd, 0, 4096, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		if mr.LKey != mr.RKey {
			t.Fatalf("lkey %#x, rkey %#x", mr.LKey, mr.RKey)
		}
		if i > 0 {
			if mr.RKey == prev {
				t.Fatalf("registration %d reused the key %#x of the MR before it in its slot", i, mr.RKey)
			}
			if mr.RKey>>8 == prev>>8 && uint8(mr.RKey) == uint8(prev)+1 {
				steps++
			}
		}
		prev = mr.RKey
		if err := mr.Dereg(); err != nil {
			t.Fatal(err)
		}
	}
	// A random byte follows the last one + 1 with probability 1/255:
	// eight times in 63 is beyond chance (about 1e-13).
	if steps >= 8 {
		t.Errorf("%d of %d keys were the previous + 1: predictable", steps, n-1)
	}
}
