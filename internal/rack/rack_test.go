package rack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// waitWC polls cq until one completion arrives or the deadline passes.
func waitWC(t *testing.T, cq *rdma.CQ) rdma.WC {
	t.Helper()
	wc := make([]rdma.WC, 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cq.Poll(wc) == 1 {
			if wc[0].Status != rdma.WCSuccess {
				t.Fatalf("completion %v", wc[0])
			}
			return wc[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatal("no completion within 10 s")
	return rdma.WC{}
}

func TestRackSendWriteRead(t *testing.T) {
	pcap := t.TempDir()
	r, err := Start(context.Background(), Config{Hosts: 2, MTU: 1024, MemSize: 8 << 20, Pcap: pcap})
	if err != nil {
		t.Fatal(err)
	}
	sendWriteRead(t, r.Hosts[0], r.Hosts[1])
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkCaptures(t, pcap)
}

// sendWriteRead connects a and b by RC and checks a SEND, a WRITE and a
// READ of the WRITE's data.
func sendWriteRead(t *testing.T, ha, hb *Host) {
	t.Helper()
	a, b, err := ConnectRC(ha, hb, RCOptions{BufSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("hinic!"), 1000) // 6000 B: six packets at MTU 1024
	if err := a.Host.Memory.WriteAt(msg, a.Buf); err != nil {
		t.Fatal(err)
	}
	sge := func(e *Endpoint, off uint64, n int) []rdma.SGE {
		return []rdma.SGE{{Addr: e.Buf + off, Length: uint32(n), LKey: e.MR.LKey}}
	}
	// SEND into a posted receive.
	if err := b.QP.PostRecv([]rdma.RecvWR{{WRID: 7, SGList: sge(b, 0, len(msg))}}); err != nil {
		t.Fatal(err)
	}
	if err := a.QP.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: sge(a, 0, len(msg))}}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.SendCQ)
	if wc := waitWC(t, b.RecvCQ); wc.WRID != 7 || wc.ByteLen != uint32(len(msg)) {
		t.Fatalf("recv %+v", wc)
	}
	got := make([]byte, len(msg))
	_ = b.Host.Memory.ReadAt(got, b.Buf)
	if !bytes.Equal(got, msg) {
		t.Fatal("SEND data differs")
	}
	// WRITE to the peer's buffer at 32 KiB, then READ it back.
	if err := a.QP.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: sge(a, 0, len(msg)), RemoteAddr: a.RemoteBuf + 32<<10, RKey: a.RemoteRKey}}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.SendCQ)
	if err := a.QP.PostSend([]rdma.SendWR{{WRID: 3, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
		SGList: sge(a, 16<<10, len(msg)), RemoteAddr: a.RemoteBuf + 32<<10, RKey: a.RemoteRKey}}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.SendCQ)
	_ = a.Host.Memory.ReadAt(got, a.Buf+16<<10)
	if !bytes.Equal(got, msg) {
		t.Fatal("WRITE then READ data differs")
	}
	a.Close()
	b.Close()
}

// checkCaptures decodes every frame the fabric captured and requires each
// RoCEv2 frame to have a valid ICRC.
func checkCaptures(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	roce := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := pcapgo.NewReader(fh)
		if err != nil {
			fh.Close()
			continue // not a classic pcap (or empty)
		}
		for {
			data, _, err := pr.ReadPacketData()
			if err != nil {
				break
			}
			p, err := proto.Parse(data, proto.LinkEthernet)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if p.Type == proto.FrameRoCEv2 {
				roce++
				if !p.ICRCValid() {
					t.Errorf("%s: %v PSN %d: bad ICRC", f, p.BTH.Opcode(), p.BTH.PSN())
				}
			}
		}
		fh.Close()
	}
	if roce == 0 {
		t.Fatal("no RoCEv2 frame captured")
	}
	t.Logf("%d RoCEv2 frames captured, every ICRC valid", roce)
	_ = fmt.Sprint
}
