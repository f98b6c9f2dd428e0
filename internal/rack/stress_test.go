package rack

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestRandomTrafficThroughFabric sends 10,000 RC messages of random sizes
// (log-uniform, 1 B to 1 MiB) and operations (SEND, WRITE, WRITE with
// immediate, READ) between two engines through HiSwitch over real sockets,
// at MTU 1024 and 4096, and checks that every one completes exactly once,
// in order, with the right data. Under the race detector it runs 1,500
// messages of at most 256 KiB.
func TestRandomTrafficThroughFabric(t *testing.T) {
	msgs, maxSize := 10000, 1<<20
	if raceEnabled || testing.Short() {
		msgs, maxSize = 1500, 256<<10
	}
	for _, mtu := range []int{1024, 4096} {
		t.Run(fmt.Sprintf("mtu=%d", mtu), func(t *testing.T) {
			randomTraffic(t, mtu, msgs, maxSize, uint64(mtu))
		})
	}
}

const window = 16 // messages in flight per batch

func randomTraffic(t *testing.T, mtu, msgs, maxSize int, seed uint64) {
	// Each of the window's messages has its own region of maxSize bytes on
	// each side: region i of the sender is the source (or the READ
	// destination), region i of the receiver the target.
	region := uint64(maxSize)
	mem := int(2*window*region) + 8<<20
	r, err := Start(context.Background(), Config{Hosts: 2, MTU: mtu, MemSize: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Nothing is lost in the lossless class, so no retransmission is ever
	// needed; a long ACK timeout (code 22, about 17 s) keeps an overloaded
	// machine from causing a spurious one, whose READ replay would read
	// memory this test has already reused (a data race in host memory,
	// though correct on the wire).
	a, b, err := ConnectRC(r.Hosts[0], r.Hosts[1], RCOptions{BufSize: window * region, SendDepth: 2 * window,
		RecvDepth: 2 * window, Events: true, Timeout: 22})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	rng := rand.New(rand.NewPCG(seed, 7))
	aSend, bRecv := NewPoller(a.SendCQ, a.SendEvents), NewPoller(b.RecvCQ, b.RecvEvents)
	ctx := context.Background()
	ops := []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm, rdma.WRRDMARead}
	type msg struct {
		op   rdma.WROpcode
		size int
		data []byte
	}
	start := time.Now()
	total := 0
	for done := 0; done < msgs; {
		n := min(window, msgs-done)
		batch := make([]msg, n)
		var wrs []rdma.SendWR
		var recvs []rdma.RecvWR
		for i := range batch {
			m := &batch[i]
			m.op = ops[rng.IntN(len(ops))]
			m.size = int(math.Exp(rng.Float64() * math.Log(float64(maxSize))))
			m.size = max(1, min(m.size, maxSize))
			m.data = make([]byte, m.size)
			for j := range m.data {
				m.data[j] = byte(rng.Uint32())
			}
			total += m.size
			off := uint64(i) * region
			id := uint64(done + i)
			wr := rdma.SendWR{WRID: id, Opcode: m.op, SendFlags: rdma.SendSignaled, ImmData: uint32(id),
				RemoteAddr: b.Buf + off, RKey: a.RemoteRKey,
				SGList: []rdma.SGE{{Addr: a.Buf + off, Length: uint32(m.size), LKey: a.MR.LKey}}}
			src := a
			if m.op == rdma.WRRDMARead {
				src = b // the data lives at the target; the READ brings it back
				if err := a.Host.Memory.WriteAt(make([]byte, m.size), a.Buf+off); err != nil {
					t.Fatal(err)
				}
			}
			if err := src.Host.Memory.WriteAt(m.data, src.Buf+off); err != nil {
				t.Fatal(err)
			}
			if m.op == rdma.WRSend || m.op == rdma.WRRDMAWriteWithImm {
				recvs = append(recvs, rdma.RecvWR{WRID: id,
					SGList: []rdma.SGE{{Addr: b.Buf + off, Length: uint32(region), LKey: b.MR.LKey}}})
			}
			wrs = append(wrs, wr)
		}
		if len(recvs) > 0 {
			if err := b.QP.PostRecv(recvs); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.QP.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			wc, err := aSend.Next(ctx)
			if err != nil {
				t.Fatalf("message %d: %v", done+i, err)
			}
			if wc.WRID != uint64(done+i) {
				t.Fatalf("send completion for %d, expected %d: out of order or duplicated", wc.WRID, done+i)
			}
		}
		for _, rw := range recvs {
			wc, err := bRecv.Next(ctx)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			m := batch[rw.WRID-uint64(done)]
			if wc.WRID != rw.WRID || int(wc.ByteLen) != m.size && m.op == rdma.WRSend {
				t.Fatalf("receive completion %d (%d B), expected %d (%d B)", wc.WRID, wc.ByteLen, rw.WRID, m.size)
			}
			if m.op == rdma.WRRDMAWriteWithImm && wc.ImmData != uint32(rw.WRID) {
				t.Fatalf("message %d: immediate %d", rw.WRID, wc.ImmData)
			}
		}
		got := make([]byte, maxSize)
		for i, m := range batch {
			off := uint64(i) * region
			where, addr := b, b.Buf+off
			if m.op == rdma.WRRDMARead {
				where, addr = a, a.Buf+off
			}
			if err := where.Host.Memory.ReadAt(got[:m.size], addr); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:m.size], m.data) {
				t.Fatalf("message %d (%v, %d B): data differs", done+i, m.op, m.size)
			}
		}
		done += n
	}
	// Nothing further may complete: every message completed exactly once.
	if n := a.SendCQ.Poll(make([]rdma.WC, 1)); n != 0 {
		t.Fatal("an extra send completion")
	}
	if n := b.RecvCQ.Poll(make([]rdma.WC, 1)); n != 0 {
		t.Fatal("an extra receive completion")
	}
	d := time.Since(start)
	c := r.Hosts[0].Device.Counters()
	t.Logf("%d messages, %.1f MiB in %v (%.0f MiB/s); host1 retransmits %d, seq NAKs %d, RNR NAKs %d",
		msgs, float64(total)/(1<<20), d.Round(time.Millisecond), float64(total)/(1<<20)/d.Seconds(),
		c.Retransmits, c.SeqNAKsReceived, c.RNRNAKsReceived)
}
