package rack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/testutil"
	"github.com/PacketFive/hinic/internal/testutil/capture"
)

// Two hosts on one machine: two network namespaces joined by a veth pair,
// an embedded rack in each (its switch's UDP socket opened inside the
// namespace), a VXLAN link between the switches over the veth.
const (
	vxlanVNI   = 4242
	vxlanPortN = 10 // the uplink port of each rack's switch
)

func tunnelOf(r *Rack) *fabric.TunnelStatus {
	return r.Fabric.Switches()[0].Status().Ports[vxlanPortN-1].Tunnel
}

// TestVXLANTwoNamespaces runs RoCEv2 between two racks in two network
// namespaces across a VXLAN link over a veth pair: RC SEND, WRITE and
// READ with their data checked, then 16 MiB of WRITEs and READs of
// every size from 1 B to 64 KiB with the data checked, and asks that the
// link lost nothing (no underlay drop, no drop in the lossless class).
// tshark captures the veth and must dissect VXLAN (VNI 4242) with
// RoCEv2 inside, in both directions, with nothing malformed; every
// inner RoCEv2 frame's ICRC is checked.
func TestVXLANTwoNamespaces(t *testing.T) {
	nsp := testutil.NewNetnsPair(t)
	tshark := testutil.Tshark(t)
	pcap := filepath.Join(t.TempDir(), "veth.pcap")
	// HINIC_VXLAN_PCAP keeps the capture at a path of one's choosing.
	if d := os.Getenv("HINIC_VXLAN_PCAP"); d != "" {
		pcap = d
	}
	stopCapture := capture.CaptureIn(t, tshark, nsp.NS[0], nsp.Veth[0], pcap)

	ctx := context.Background()
	racks := [2]*Rack{}
	for i := range 2 {
		cfg := Config{Hosts: 1, HostBase: i, MTU: 1024, MemSize: 32 << 20, DialTunnel: testutil.DialIn(nsp.NS[i]),
			Uplinks: []fabric.PortConfig{{Num: vxlanPortN, Kind: fabric.KindVXLAN, VNI: vxlanVNI,
				Local: nsp.Addr[i], Remote: nsp.Addr[1-i]}}}
		r, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		racks[i] = r
	}
	deadline := time.Now().Add(20 * time.Second)
	for tunnelOf(racks[0]).Link != "up" || tunnelOf(racks[1]).Link != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("tunnel not up: %+v / %+v", tunnelOf(racks[0]), tunnelOf(racks[1]))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ha, hb := racks[0].Hosts[0], racks[1].Hosts[0]
	sendWriteRead(t, ha, hb)
	bulkWriteRead(t, ha, hb, 16<<20)

	for i, r := range racks {
		ts := tunnelOf(r)
		ps := r.Fabric.Switches()[0].Status().Ports[vxlanPortN-1]
		t.Logf("rack %d tunnel: rx %d tx %d datagrams, underlay drops %d, bad %v, pauses sent %d, headroom %d B, PFC tx %d rx %d",
			i, ts.RxDatagrams, ts.TxDatagrams, ts.UnderlayDrops, ts.Bad, ts.PausesSent, ts.Headroom, ps.PFCSent, ps.PFCRecv)
		// TxErrors is not checked: the first keepalive may reach the
		// other namespace before its socket is open (ICMP unreachable).
		if ts.UnderlayDrops != 0 {
			t.Errorf("rack %d: the tunnel lost datagrams: %+v", i, ts)
		}
		for reason, n := range ts.Bad {
			if n != 0 {
				t.Errorf("rack %d: %d datagrams dropped as %s", i, n, reason)
			}
		}
		for _, p := range r.Fabric.Switches()[0].Status().Ports {
			if p.Classes[3].QueueFull != 0 {
				t.Errorf("rack %d port %d: %d tail drops in the lossless class", i, p.Num, p.Classes[3].QueueFull)
			}
		}
	}
	stopCapture()
	capture.CheckVXLANCapture(t, tshark, pcap, vxlanVNI, [2]string{ha.IP.String(), hb.IP.String()})
}

// bulkWriteRead WRITEs total bytes from a to b in messages of every size
// from 1 B to 64 KiB, READs each back and compares.
func bulkWriteRead(t *testing.T, ha, hb *Host, total int) {
	t.Helper()
	a, b, err := ConnectRC(ha, hb, RCOptions{BufSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	sge := func(off uint64, n int) []rdma.SGE {
		return []rdma.SGE{{Addr: a.Buf + off, Length: uint32(n), LKey: a.MR.LKey}}
	}
	size, sent, seq := 1, 0, 0
	for sent < total {
		seq++
		// Each message starts with 0x5A: tshark reads a payload whose
		// bytes 2-3 are zero (a 1-byte one and its pad) as an IPoIB
		// header and dissects what follows by the EtherType in bytes
		// 0-1, which 0x5A00 is not.
		msg := bytes.Repeat([]byte{0x5A, byte(seq), byte(seq >> 8)}, size/3+1)[:size]
		if err := a.Host.Memory.WriteAt(msg, a.Buf); err != nil {
			t.Fatal(err)
		}
		if err := a.QP.PostSend([]rdma.SendWR{
			{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: sge(0, size), RemoteAddr: a.RemoteBuf, RKey: a.RemoteRKey},
			{WRID: 2, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled, SGList: sge(128<<10, size), RemoteAddr: a.RemoteBuf, RKey: a.RemoteRKey},
		}); err != nil {
			t.Fatal(err)
		}
		if wc := waitWC(t, a.SendCQ); wc.WRID != 2 {
			t.Fatalf("completion %+v", wc)
		}
		got := make([]byte, size)
		_ = a.Host.Memory.ReadAt(got, a.Buf+128<<10)
		if !bytes.Equal(got, msg) {
			t.Fatalf("message %d (%d B): READ back differs from the WRITE", seq, size)
		}
		sent += size
		size = size*2 + 1
		if size > 64<<10 {
			size = 1
		}
	}
}
