package integration

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestFabricRestart: the switch goes away with RC WRITEs in flight and a
// new one starts on the same sockets. Each guest sees PORT_ERR, then
// PORT_ACTIVE once its vNIC has dialled the port again, with no reset;
// LINK_UP and QUERY_PORT follow; the WRITEs complete through
// retransmission with their data, the same QPs carry a SEND afterwards,
// and LinkDownedCounter counts the one link loss.
func TestFabricRestart(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	b := newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	// Timeout code 18 (1.07 s) and 7 retries: a budget of 8.6 s, for a
	// switch that is away for as long as the test takes to restart it.
	a.connectTimeout(t, b, 18)
	b.connectTimeout(t, a, 18)
	for _, g := range tb.guests {
		g.Events()
	}
	const n, size = 8, 4096
	want := fill(t, a.g, a.buf, n*size, 3)
	for i := range n {
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
			RemoteAddr: b.buf + uint64(i*size), RKey: b.rkey}, []device.SGE{{Addr: a.buf + uint64(i*size), Length: size, LKey: a.lkey}}, nil)
	}
	tb.fab.Close()
	for _, g := range tb.guests {
		if ev, err := g.WaitEvent(ctx, device.EvPortErr); err != nil || ev.Handle != 1 {
			t.Fatalf("event %+v, %v; want PORT_ERR for port 1", ev, err)
		}
	}
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(tb.dir, "fabric"), Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	for _, g := range tb.guests {
		if ev, err := g.WaitEvent(ctx, device.EvPortActive); err != nil || ev.Handle != 1 {
			t.Fatalf("event %+v, %v; want PORT_ACTIVE for port 1", ev, err)
		}
		if st := g.DevStatus(); st != device.DevReady|device.DevLive|device.DevLinkUp {
			t.Errorf("dev_status %#x after the restart", st)
		}
		pa, err := g.QueryPort(ctx)
		if err != nil || pa.State != uint32(rdma.PortActive) {
			t.Fatalf("QUERY_PORT %+v, %v: want ACTIVE", pa, err)
		}
		for _, e := range g.Events() {
			if e.Type != device.EvPortErr && e.Type != device.EvPortActive {
				t.Errorf("unexpected event %+v", e)
			}
		}
	}
	es, err := a.scq.Wait(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		if e.Status != uint32(rdma.WCSuccess) || e.Opcode != uint32(rdma.WCRDMAWrite) || e.WRID != uint64(i) {
			t.Fatalf("WRITE %d: CQE %+v", i, e)
		}
	}
	if got := read(t, b.g, b.buf, n*size); !bytes.Equal(got, want) {
		t.Fatal("WRITE data differs after the restart")
	}
	b.qp.PostRecv(9, []device.SGE{{Addr: b.buf + 48<<10, Length: size, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 100, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: a.buf, Length: size, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 100)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 9)
	if got := read(t, b.g, b.buf+48<<10, size); !bytes.Equal(got, want[:size]) {
		t.Fatal("SEND data differs after the restart")
	}
	for i, v := range tb.srv.Status().VNICs {
		if !v.LinkUp {
			t.Errorf("%s: link down in the status after the restart", v.Name)
		}
		if c := queryCounters(t, tb.guests[i]); c.LinkDowned != 1 {
			t.Errorf("%s: LinkDownedCounter %d, want 1", v.Name, c.LinkDowned)
		}
	}
}
