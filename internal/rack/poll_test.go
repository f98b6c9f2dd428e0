package rack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestPollerWaits: a Poller waits on the completion channel (or polls
// without one) for each WRITE, in order, reusing its timers; an empty CQ
// ends in the timeout error, a cancelled context in its error.
func TestPollerWaits(t *testing.T) {
	r, err := Start(context.Background(), Config{Hosts: 2, MTU: 1024, MemSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, events := range []bool{true, false} {
		a, _, err := ConnectRC(r.Hosts[0], r.Hosts[1], RCOptions{BufSize: 64 << 10, Events: events})
		if err != nil {
			t.Fatal(err)
		}
		p := NewPoller(a.SendCQ, a.SendEvents)
		wr := []rdma.SendWR{{Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
			SGList:     []rdma.SGE{{Addr: a.Buf, Length: 64, LKey: a.MR.LKey}},
			RemoteAddr: a.RemoteBuf, RKey: a.RemoteRKey}}
		id := uint64(0)
		write := func() {
			id++
			wr[0].WRID = id
			if err := a.QP.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			wc, err := p.Next(context.Background())
			if err != nil || wc.WRID != id || wc.Opcode != rdma.WCRDMAWrite {
				t.Fatalf("events %v: write %d: %+v, %v", events, id, wc, err)
			}
		}
		for range 50 {
			write()
		}
		p.Timeout = 30 * time.Millisecond
		if _, err := p.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "no completion within 30ms") {
			t.Errorf("events %v: empty CQ: %v", events, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.Timeout = time.Minute
		if _, err := p.Next(ctx); err != context.Canceled {
			t.Errorf("events %v: cancelled: %v", events, err)
		}
	}
}
