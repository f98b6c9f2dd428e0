package rack

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// waitAny polls cq for one completion, whatever its status, with a
// generous hang guard.
func waitAny(t *testing.T, cq *rdma.CQ) rdma.WC {
	t.Helper()
	wc := make([]rdma.WC, 1)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cq.Poll(wc) == 1 {
			return wc[0]
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("no completion within 60 s")
	return rdma.WC{}
}

// TestRestartFabric restarts the switch under RC traffic: WRITEs posted
// before the restart and still in flight complete after it, every host
// dialled its port again, and SEND, WRITE and READ work on the new
// fabric with the data intact, on both port kinds.
func TestRestartFabric(t *testing.T) {
	for _, port := range []string{PortSocket, PortShm} {
		t.Run("port="+port, func(t *testing.T) {
			r, err := Start(context.Background(), Config{Hosts: 2, MTU: 1024, MemSize: 8 << 20, Port: port})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			a, b, err := ConnectRC(r.Hosts[0], r.Hosts[1], RCOptions{BufSize: 1 << 20, SendDepth: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			defer b.Close()
			sge := func(e *Endpoint, off uint64, n int) []rdma.SGE {
				return []rdma.SGE{{Addr: e.Buf + off, Length: uint32(n), LKey: e.MR.LKey}}
			}
			// 32 WRITEs of 8 KiB each, a distinct pattern per slot.
			const n, size = 32, 8 << 10
			src := make([]byte, n*size)
			for i := range src {
				src[i] = byte(i*7 + i/size)
			}
			if err := a.Host.Memory.WriteAt(src, a.Buf); err != nil {
				t.Fatal(err)
			}
			var wrs []rdma.SendWR
			for i := range n {
				wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
					SGList: sge(a, uint64(i*size), size), RemoteAddr: a.RemoteBuf + uint64(i*size), RKey: a.RemoteRKey})
			}
			if err := a.QP.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
			defer cancel()
			old, err := r.RestartFabric(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(old.Switches) != 1 {
				t.Fatalf("old fabric status: %+v", old)
			}
			for _, h := range r.Hosts {
				if got := h.links.Load(); got != 2 {
					t.Fatalf("%s attached %d times, want 2", h.Name, got)
				}
			}
			for i := range n {
				if wc := waitAny(t, a.SendCQ); wc.Status != rdma.WCSuccess || wc.WRID != uint64(i) {
					t.Fatalf("WRITE %d: completion %+v", i, wc)
				}
			}
			got := make([]byte, len(src))
			_ = b.Host.Memory.ReadAt(got, b.Buf)
			if !bytes.Equal(got, src) {
				t.Fatal("WRITE data differs after the restart")
			}
			// The new fabric carries SEND and READ too.
			if err := b.QP.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: sge(b, 512<<10, size)}}); err != nil {
				t.Fatal(err)
			}
			if err := a.QP.PostSend([]rdma.SendWR{
				{WRID: 100, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: sge(a, 0, size)},
				{WRID: 101, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled, SGList: sge(a, 768<<10, size),
					RemoteAddr: a.RemoteBuf + size, RKey: a.RemoteRKey},
			}); err != nil {
				t.Fatal(err)
			}
			for _, id := range []uint64{100, 101} {
				if wc := waitAny(t, a.SendCQ); wc.Status != rdma.WCSuccess || wc.WRID != id {
					t.Fatalf("WR %d: completion %+v", id, wc)
				}
			}
			if wc := waitAny(t, b.RecvCQ); wc.Status != rdma.WCSuccess || wc.ByteLen != size {
				t.Fatalf("receive: %+v", wc)
			}
			_ = b.Host.Memory.ReadAt(got[:size], b.Buf+512<<10)
			if !bytes.Equal(got[:size], src[:size]) {
				t.Fatal("SEND data differs after the restart")
			}
			_ = a.Host.Memory.ReadAt(got[:size], a.Buf+768<<10)
			if !bytes.Equal(got[:size], src[size:2*size]) {
				t.Fatal("READ data differs after the restart")
			}
			// The new fabric is the one in use.
			st := r.Fabric.Status()
			var rx uint64
			for _, p := range st.Switches[0].Ports {
				rx += p.RxFrames
			}
			if rx == 0 {
				t.Fatal("the new fabric carried no frame")
			}
		})
	}
}

// TestRestartFabricRefused: a raw rack and an InfiniBand one cannot
// restart their fabric.
func TestRestartFabricRefused(t *testing.T) {
	r, err := Start(context.Background(), Config{Hosts: 2, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.RestartFabric(context.Background()); err == nil {
		t.Fatal("a raw rack restarted its fabric")
	}
}

// TestPeerDeath: when a host dies (its engine stops, as the device
// backend's does when its guest's QEMU exits) its peer's QP runs out of
// retries: the WR in flight completes with RETRY_EXC_ERR, the next with
// WR_FLUSH_ERR, and the QP is in ERR. With timeout code 8 (1 ms) and 7
// retries the budget is 8 ms; the wait is only a hang guard.
func TestPeerDeath(t *testing.T) {
	for _, op := range []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMARead} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			r, err := Start(context.Background(), Config{Hosts: 2, MTU: 1024, MemSize: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			a, b, err := ConnectRC(r.Hosts[0], r.Hosts[1], RCOptions{BufSize: 64 << 10, Timeout: 8, RetryCnt: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			sge := []rdma.SGE{{Addr: a.Buf, Length: 4096, LKey: a.MR.LKey}}
			if err := b.QP.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: []rdma.SGE{{Addr: b.Buf, Length: 4096, LKey: b.MR.LKey}}}}); err != nil {
				t.Fatal(err)
			}
			// The peer works, then dies.
			if err := a.QP.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
				SGList: sge, RemoteAddr: a.RemoteBuf, RKey: a.RemoteRKey}}); err != nil {
				t.Fatal(err)
			}
			if wc := waitAny(t, a.SendCQ); wc.Status != rdma.WCSuccess {
				t.Fatalf("before the death: %+v", wc)
			}
			if err := b.Host.Device.Close(); err != nil {
				t.Fatal(err)
			}
			wr := rdma.SendWR{WRID: 2, Opcode: op, SendFlags: rdma.SendSignaled, SGList: sge}
			if op != rdma.WRSend {
				wr.RemoteAddr, wr.RKey = a.RemoteBuf, a.RemoteRKey
			}
			next := rdma.SendWR{WRID: 3, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled, SGList: sge,
				RemoteAddr: a.RemoteBuf, RKey: a.RemoteRKey}
			if err := a.QP.PostSend([]rdma.SendWR{wr, next}); err != nil {
				t.Fatal(err)
			}
			if wc := waitAny(t, a.SendCQ); wc.WRID != 2 || wc.Status != rdma.WCRetryExcErr {
				t.Fatalf("first WR after the death: %+v, want RETRY_EXC_ERR", wc)
			}
			if wc := waitAny(t, a.SendCQ); wc.WRID != 3 || wc.Status != rdma.WCWRFlushErr {
				t.Fatalf("second WR after the death: %+v, want WR_FLUSH_ERR", wc)
			}
			if st := a.QP.State(); st != rdma.QPStateErr {
				t.Fatalf("QP state %v, want ERR", st)
			}
			if c := a.Host.Device.Counters(); c.Retransmits < 7 {
				t.Fatalf("%d retransmissions before giving up, want at least the retry count 7", c.Retransmits)
			}
		})
	}
}
