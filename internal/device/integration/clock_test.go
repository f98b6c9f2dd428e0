package integration

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

func queryClock(t *testing.T, g *guestsim.Guest) uint64 {
	t.Helper()
	out, err := g.Admin(testCtx(t), &device.AdminCmd{Opcode: device.CmdQueryClock})
	if err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(out.Out[:8])
}

// TestQueryClock: QUERY_CLOCK (ABI 1.17) reads the clock completions are
// stamped with, so a completion's stamp lies between two readings; a
// handle other than 0 is refused.
func TestQueryClock(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)

	before := uint64(time.Now().UnixNano())
	c0 := queryClock(t, a.g)
	after := uint64(time.Now().UnixNano())
	if c0 < before || c0 > after {
		t.Errorf("QUERY_CLOCK %d outside the host's [%d, %d]", c0, before, after)
	}

	fill(t, a.g, a.buf, 64, 5)
	b.qp.PostRecv(3, []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 4, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	se := wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 4)
	re := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 3)
	c1 := queryClock(t, b.g)
	for _, e := range []device.CQE{se, re} {
		if e.Timestamp < c0 || e.Timestamp > c1 {
			t.Errorf("CQE stamp %d outside the device clock readings [%d, %d]", e.Timestamp, c0, c1)
		}
	}

	_, err := a.g.Admin(testCtx(t), &device.AdminCmd{Opcode: device.CmdQueryClock, Handle: 1})
	wantStatus(t, err, device.StEINVAL)
}
