package fabric

import "sync/atomic"

// DropReason says why a frame was dropped.
type DropReason int

// Drop reasons. Each has a counter per port and a name in status output.
const (
	DropMalformed  DropReason = iota // the frame does not parse (runt, bad header)
	DropOversize                     // larger than the port's max-frame
	DropVLAN                         // VLAN not allowed on the ingress port
	DropFiltered                     // destination is on the ingress port
	DropQueueFull                    // lossy class, egress queue full (tail drop)
	DropLinkDown                     // egress port down, or it went down with the frame queued
	DropFault                        // fault injection
	DropLinkLayer                    // Ethernet frame for an IB port or the reverse
	DropUnroutable                   // IB: ibsw did not forward it
	DropMACControl                   // PAUSE/PFC (EtherType 0x8808) from a port without trust-pause
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"malformed", "oversize", "vlan", "filtered", "queue-full", "link-down", "fault", "link-layer", "unroutable",
	"mac-control",
}

// String returns the reason's name as status shows it.
func (r DropReason) String() string {
	if r >= 0 && r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// portCounters are a port's statistics. rx counters are written by the
// port's rx goroutine, tx counters by its tx goroutine, drops by any rx
// goroutine (the egress port counts its own tail drops); all are atomic
// so that status reads them at any time. The padding keeps rx and tx on
// separate cache lines. Sent frames are counted only by traffic class,
// where the frame's class is already known: the port's totals (frames,
// bytes, PFC frames sent, ECN marks) are the sums, taken by Status, so a
// data frame costs two atomic adds.
type portCounters struct {
	rxFrames, rxBytes atomic.Uint64
	pfcRx, pauseRx    atomic.Uint64
	// pfcRxClass counts the PFC frames received that paused or resumed
	// each class (one frame may name several).
	pfcRxClass [NumTC]atomic.Uint64
	_          [32]byte
	// txClassFrames and txClassBytes count data frames sent by class;
	// pfcTxClass counts PFC frames sent (XOFF and XON) by the class
	// they pause, pfcTxBytes their bytes.
	txClassFrames, txClassBytes [NumTC]atomic.Uint64
	pfcTxClass                  [NumTC]atomic.Uint64
	pfcTxBytes                  atomic.Uint64
	_                           [56]byte
	drops                       [numDropReasons]atomic.Uint64
	// queueFullClass breaks drops[DropQueueFull] down by class;
	// ecnClass counts the frames ECN-marked at the egress queue.
	queueFullClass, ecnClass [NumTC]atomic.Uint64
	floods                   atomic.Uint64
	faults                   atomic.Uint64 // faults injected (all kinds)
	// Faults injected by kind; faults is their sum.
	faultDrops, faultDups, faultReorders, faultCorrupts atomic.Uint64
}
