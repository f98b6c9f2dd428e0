package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/ibsm"
	"github.com/PacketFive/hinic/internal/rdma"
)

// ibSubnet brings tb's InfiniBand subnet up with a subnet manager in
// guest 1 and returns each guest's LID.
func ibSubnet(t *testing.T, tb *testbed) []uint16 {
	t.Helper()
	sm := ibsm.New(newGuestMADPort(t, tb.guests[0]))
	if err := sm.Bringup(); err != nil {
		t.Fatal(err)
	}
	lids := make([]uint16, len(tb.guests))
	for i, g := range tb.guests {
		pa, err := g.QueryPort(testCtx(t))
		if err != nil || pa.State != uint32(rdma.PortActive) || pa.LID == 0 {
			t.Fatalf("guest %d port after the SM: %+v %v", i+1, pa, err)
		}
		lids[i] = pa.LID
	}
	return lids
}

// TestIBBidirectionalReads: two guests READ from each other at once
// over an InfiniBand switch, whose links are lossless (credit flow
// control: a full egress queue stops the switch reading the ingress
// port). 8 QP pairs with 32 READs of 32 KiB outstanding each way put
// about 8 MiB in flight per direction, more than the sockets and the
// switch's queue hold, so the switch pushes back on both backends. READ
// responses are made by the goroutine that reads the fabric (it runs the
// engine for the requests it reads); if it waited for the fabric while
// its peer did the same, neither would read again and the switch would
// wait for both. Every READ must complete, with the peer's bytes.
// Before the fabric port kept its backlog (the engine waited in
// sendmmsg), 24 of the 512 READs completed in 20 s, then nothing moved.
func TestIBBidirectionalReads(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 16 MiB")
	}
	tb := newIBTestbed(t, 2)
	lids := ibSubnet(t, tb)
	const (
		pairs    = 8
		depth    = 32 // READs outstanding per QP
		rounds   = 1
		readSize = 32 << 10 // from the first half of the peer's buffer to the second of one's own
	)
	var a, b [pairs]*rcEnd
	for i := range pairs {
		a[i] = newRCEnd(t, tb.guests[0], [6]byte{}, false)
		b[i] = newRCEnd(t, tb.guests[1], [6]byte{}, false)
		a[i].connectLIDDepth(t, b[i], lids[1], depth, 0)
		b[i].connectLIDDepth(t, a[i], lids[0], depth, 0)
	}
	// Each end reads the first half of its peer's buffer into the second
	// half of its own: what arrives is checked against the peer's.
	type side struct {
		ends, peers *[pairs]*rcEnd
		want        [pairs][]byte
	}
	sides := []*side{{ends: &a, peers: &b}, {ends: &b, peers: &a}}
	for si, s := range sides {
		for i, e := range s.peers {
			s.want[i] = fill(t, e.g, e.buf, readSize, byte(16*si+i))
		}
	}
	// No local ACK timer (timeout 0): the path is lossless, and how long
	// the READs take depends on the machine's load; a stall shows as
	// the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	total := pairs * depth * rounds
	posted := make([][pairs]int, 2)
	done := make([][pairs]int, 2)
	remaining := 2 * total
	for remaining > 0 {
		for si, s := range sides {
			for i, e := range s.ends {
				for posted[si][i] < depth*rounds && posted[si][i]-done[si][i] < depth {
					p := s.peers[i]
					e.qp.PostSend(device.SendWQE{WRID: uint64(posted[si][i]), Opcode: uint8(rdma.WRRDMARead),
						SendFlags: uint16(rdma.SendSignaled), RemoteAddr: p.buf, RKey: p.rkey},
						[]device.SGE{{Addr: e.buf + readSize, Length: readSize, LKey: e.lkey}}, nil)
					posted[si][i]++
				}
				for _, c := range e.scq.Poll() {
					if c.Status != uint32(rdma.WCSuccess) || c.WRID != uint64(done[si][i]) {
						t.Fatalf("side %d QP %d: CQE %d %+v%s", si+1, i, done[si][i], c, stuck(tb))
					}
					done[si][i]++
					remaining--
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d READs done before the deadline: %v", 2*total-remaining, 2*total, stuck(tb))
		}
	}
	for si, s := range sides {
		for i, e := range s.ends {
			if got := read(t, e.g, e.buf+readSize, readSize); !bytes.Equal(got, s.want[i]) {
				t.Fatalf("side %d QP %d: READ data differs", si+1, i)
			}
		}
	}
	t.Logf("counters:%s", stuck(tb))
}

// stuck describes the vNICs' engine counters (for a failure message).
func stuck(tb *testbed) string {
	var s string
	for i, v := range tb.srv.Status().VNICs {
		c := v.Engine
		s += fmt.Sprintf("\n  vNIC %d: tx %d rx %d dropped %d retransmits %d timeouts %d seqNAKs %d rnr %d stall recoveries %d",
			i+1, c.TxPackets, c.RxPackets, c.RxDropped, c.Retransmits, c.RetransmitTimeouts, c.SeqNAKsReceived, c.RNRNAKsReceived, c.StallRecoveries)
	}
	return s
}
