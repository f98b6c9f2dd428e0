package faultsuite

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/PacketFive/hinic/internal/rdma"
)

// Kind is one kind of operation in the mix.
type Kind int

// The kinds of operation the suite runs: the RC kinds travel on the RC
// streams (rc.go), the datagram kinds on each host's UD QP (ud.go).
const (
	Send      Kind = iota // SEND into a posted receive
	Write                 // RDMA WRITE
	WriteImm              // RDMA WRITE with immediate (consumes a receive)
	Read                  // RDMA READ
	FetchAdd              // ATOMIC FETCH_AND_ADD onto a shared counter
	CmpSwap               // ATOMIC CMP_AND_SWP onto a shared word
	WriteMW               // RDMA WRITE through a type 2 memory window over the target slots
	UDSend                // UD SEND to another host's UD QP
	McastSend             // UD SEND to the multicast group every host's UD QP joined
	NumKinds
)

// kindInfo is the kind table: what the suite needs to know to post an op
// of a kind and to check its completion. A new kind is a new constant and
// a new row. A kind on another transport (UD SEND, multicast SEND on a
// lossless class) also needs a flow of its own that runs it and says
// what is lost and how loss is counted (see flow in suite.go); the mix,
// the plan and the report need no change.
type kindInfo struct {
	name   string
	weight int // share of the default mix
	opcode rdma.WROpcode
	wc     rdma.WCOpcode // the requester's completion opcode
	sized  bool          // carries a payload of the op's size
	recv   bool          // consumes a receive at the target
	ud     bool          // a datagram: runs on the UD flows, at most one MTU
}

var kinds = [NumKinds]kindInfo{
	Send:      {name: "SEND", weight: 3, opcode: rdma.WRSend, wc: rdma.WCSend, sized: true, recv: true},
	Write:     {name: "WRITE", weight: 2, opcode: rdma.WRRDMAWrite, wc: rdma.WCRDMAWrite, sized: true},
	WriteImm:  {name: "WRITE_IMM", weight: 2, opcode: rdma.WRRDMAWriteWithImm, wc: rdma.WCRDMAWrite, sized: true, recv: true},
	Read:      {name: "READ", weight: 2, opcode: rdma.WRRDMARead, wc: rdma.WCRDMARead, sized: true},
	FetchAdd:  {name: "FETCH_AND_ADD", weight: 2, opcode: rdma.WRAtomicFetchAndAdd, wc: rdma.WCFetchAdd},
	CmpSwap:   {name: "CMP_AND_SWP", weight: 1, opcode: rdma.WRAtomicCmpAndSwp, wc: rdma.WCCompSwap},
	WriteMW:   {name: "WRITE_MW", weight: 1, opcode: rdma.WRRDMAWrite, wc: rdma.WCRDMAWrite, sized: true},
	UDSend:    {name: "UD_SEND", weight: 2, opcode: rdma.WRSend, wc: rdma.WCSend, sized: true, ud: true},
	McastSend: {name: "UD_MCAST", weight: 1, opcode: rdma.WRSend, wc: rdma.WCSend, sized: true, ud: true},
}

// String returns the kind's verb name.
func (k Kind) String() string {
	if k >= 0 && k < NumKinds {
		return kinds[k].name
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Mix weighs the kinds: an op is of kind k with probability
// Mix[k]/sum(Mix). The zero Mix is DefaultMix.
type Mix [NumKinds]int

// DefaultMix is the weights of the kind table.
func DefaultMix() Mix {
	var m Mix
	for k, ki := range kinds {
		m[k] = ki.weight
	}
	return m
}

func (m Mix) total() int {
	t := 0
	for _, w := range m {
		t += w
	}
	return t
}

func (m Mix) pick(rng *rand.Rand) Kind {
	x := rng.IntN(m.total())
	for k, w := range m {
		if x < w {
			return Kind(k)
		}
		x -= w
	}
	return NumKinds - 1
}

// op is one planned operation of a stream. Everything about it follows
// from the seed: its kind, size, target slot, and for atomics the word and
// the operand.
type op struct {
	seq  int // position in the stream: the WRID, and the order it completes in
	kind Kind
	// UD: the host a UD_SEND goes to (index); -1 for the group.
	to   int
	size int // payload bytes (sized kinds)
	recv int // the peer receive it consumes (n-th of the stream's), or -1
	// READ: offset into the target's read source.
	readOff int
	// Atomics: the target word and the value added (FETCH_AND_ADD).
	word int
	add  uint64
	// Set when the op is posted (CMP_AND_SWP): the value compared and
	// the value swapped in.
	compare, swap uint64
}

// sizeFor draws a payload size: a quarter of the ops land on a path MTU
// boundary (one byte either side of one and two packets), the rest are
// log-uniform from 1 B to max.
func sizeFor(rng *rand.Rand, mtu, maxSize int) int {
	if rng.IntN(4) == 0 {
		edges := []int{1, mtu - 1, mtu, mtu + 1, 2*mtu - 1, 2 * mtu, 2*mtu + 1, maxSize}
		return min(edges[rng.IntN(len(edges))], maxSize)
	}
	n := int(math.Exp(rng.Float64() * math.Log(float64(maxSize))))
	return max(1, min(n, maxSize))
}
