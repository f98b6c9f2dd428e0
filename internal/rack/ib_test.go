package rack

import (
	"context"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// TestIBRackSubnetAndRC starts an InfiniBand rack: the subnet manager on
// host1's QP0 discovers the switch and the hosts, gives LIDs, programs the
// switch's LFT and activates every port; then RC traffic flows by LID.
func TestIBRackSubnetAndRC(t *testing.T) {
	ctx := context.Background()
	r, err := Start(ctx, Config{Hosts: 3, MTU: 2048, MemSize: 8 << 20, LinkLayer: LinkIB})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.SM == nil || len(r.SM.Nodes) != 4 || len(r.SM.Switches()) != 1 {
		t.Fatalf("the SM found %d nodes", len(r.SM.Nodes))
	}
	for i, h := range r.Hosts {
		pa := h.Device.QueryPort()
		want := uint16(1)
		if i > 0 {
			want = uint16(i + 2) // the switch is LID 2
		}
		if pa.LinkLayer != rdma.LinkLayerInfiniBand || pa.State != rdma.PortActive || pa.LID != want || pa.SMLID != 1 {
			t.Errorf("%s: %+v, want Active with LID %d and SM LID 1", h.Name, pa, want)
		}
	}
	ea, eb, err := ConnectRC(r.Hosts[1], r.Hosts[2], RCOptions{BufSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	defer eb.Close()
	payload := make([]byte, 5000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	if err := ea.Host.Memory.WriteAt(payload, ea.Buf); err != nil {
		t.Fatal(err)
	}
	if err := eb.QP.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: []rdma.SGE{{Addr: eb.Buf, Length: 8192, LKey: eb.MR.LKey}}}}); err != nil {
		t.Fatal(err)
	}
	if err := ea.QP.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: []rdma.SGE{{Addr: ea.Buf, Length: 5000, LKey: ea.MR.LKey}}}}); err != nil {
		t.Fatal(err)
	}
	if wc, err := NewPoller(eb.RecvCQ, nil).Next(ctx); err != nil || wc.ByteLen != 5000 {
		t.Fatalf("receive: %+v %v", wc, err)
	}
	got := make([]byte, 5000)
	if err := eb.Host.Memory.ReadAt(got, eb.Buf); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != payload[i] {
			t.Fatalf("byte %d differs", i)
		}
	}
	st := r.Fabric.Switches()[0]
	_ = st
}
