package integration

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestLinkTransport runs RC WRITEs, READs and SENDs and guest L2 frames
// between two vNICs over each kind of fabric link: a shared-memory ring
// pair (the default), a socket asked for with transport=socket, and a
// socket because the switch declines shared memory (no-shm). The
// backend's status and the switch's must both name the kind, and every
// byte must arrive.
func TestLinkTransport(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		noShm           bool
		want            string
	}{
		{"shm", "", false, device.TransportShm},
		{"socket", device.TransportSocket, false, device.TransportSocket},
		{"declined", device.TransportShm, true, device.TransportSocket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestbedFabric(t, 2, func(c *fabric.Config) { c.NoShm = tc.noShm },
				func(_ int, c *device.VNICConfig) { c.FabricTransport = tc.transport }, nil)
			for i, v := range tb.srv.Status().VNICs {
				if v.FabricTransport != tc.want || !v.LinkUp {
					t.Fatalf("vNIC %d: link up %v, transport %q; want up, %q", i, v.LinkUp, v.FabricTransport, tc.want)
				}
			}
			for _, p := range tb.fab.Status().Switches[0].Ports[:2] {
				if p.Transport != tc.want {
					t.Fatalf("switch port %d: transport %q, want %q", p.Num, p.Transport, tc.want)
				}
			}
			exchange(t, tb)
		})
	}
}

// exchange moves data both ways between the testbed's first two guests:
// a burst of four 16 KiB WRITEs, a READ of the first back, a SEND the
// other way, three times, then L2 frames each way; every payload is
// compared.
func exchange(t *testing.T, tb *testbed) {
	t.Helper()
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	const size = 16 << 10
	for round := range 3 {
		want := fill(t, a.g, a.buf, 4*size, byte(round))
		for i := range 4 {
			a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
				RemoteAddr: b.buf + uint64(i*size), RKey: b.rkey}, []device.SGE{{Addr: a.buf + uint64(i*size), Length: size, LKey: a.lkey}}, nil)
		}
		es, err := a.scq.Wait(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range es {
			if e.Status != uint32(rdma.WCSuccess) || e.WRID != uint64(i) {
				t.Fatalf("round %d WRITE %d: CQE %+v", round, i, e)
			}
		}
		if got := read(t, b.g, b.buf, 4*size); !bytes.Equal(got, want) {
			t.Fatalf("round %d: WRITE data differs", round)
		}
		// A reads B's copy of the first WRITE into its buffer at 48 KiB.
		a.qp.PostSend(device.SendWQE{WRID: 9, Opcode: uint8(rdma.WRRDMARead), SendFlags: uint16(rdma.SendSignaled),
			RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf + 48<<10, Length: size, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMARead, 9)
		if got := read(t, a.g, a.buf+48<<10, size); !bytes.Equal(got, want[:size]) {
			t.Fatalf("round %d: READ data differs", round)
		}
		// SEND from B to A.
		msg := fill(t, b.g, b.buf+60<<10, 3000, byte(40+round))
		a.qp.PostRecv(11, []device.SGE{{Addr: a.buf + 56<<10, Length: 4096, LKey: a.lkey}})
		b.qp.PostSend(device.SendWQE{WRID: 12, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: b.buf + 60<<10, Length: 3000, LKey: b.lkey}}, nil)
		wantCQE(t, b.scq, rdma.WCSuccess, rdma.WCSend, 12)
		wantCQE(t, a.rcq, rdma.WCSuccess, rdma.WCRecv, 11)
		if got := read(t, a.g, a.buf+56<<10, 3000); !bytes.Equal(got, msg) {
			t.Fatalf("round %d: SEND data differs", round)
		}
	}

	l2Exchange(t, tb)
}

// BenchmarkLinkTransport measures the backend's fabric link by kind, as
// a rack's daemons run it (no polling on the rings): two vNICs of one
// `device serve` and the switch in one process, the guests simulated.
// write moves 64 KiB per op as four 16 KiB RC WRITEs (MB/s); pingpong
// is one 64-byte SEND each way (ns/op is the round trip). Compare the
// kinds' figures with each other, run in one sitting.
func BenchmarkLinkTransport(b *testing.B) {
	for _, kind := range []string{device.TransportShm, device.TransportSocket} {
		tb := newTestbedFabric(b, 2, func(c *fabric.Config) { c.ShmNoPoll = true },
			func(_ int, c *device.VNICConfig) { c.FabricTransport = kind }, nil)
		a, p := connectPair(b, tb, false)
		ctx := testCtx(b)
		b.Run("kind="+kind+"/op=write", func(b *testing.B) {
			const size = 16 << 10
			b.SetBytes(4 * size)
			for range b.N {
				for i := range 4 {
					a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
						RemoteAddr: p.buf + uint64(i*size), RKey: p.rkey}, []device.SGE{{Addr: a.buf + uint64(i*size), Length: size, LKey: a.lkey}}, nil)
				}
				if _, err := a.scq.Wait(ctx, 4); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("kind="+kind+"/op=pingpong", func(b *testing.B) {
			for range b.N {
				p.qp.PostRecv(1, []device.SGE{{Addr: p.buf, Length: 64, LKey: p.lkey}})
				a.qp.PostRecv(2, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}})
				a.qp.PostSend(device.SendWQE{WRID: 3, Opcode: uint8(rdma.WRSend)}, []device.SGE{{Addr: a.buf + 4096, Length: 64, LKey: a.lkey}}, nil)
				if _, err := p.rcq.Wait(ctx, 1); err != nil {
					b.Fatal(err)
				}
				p.qp.PostSend(device.SendWQE{WRID: 4, Opcode: uint8(rdma.WRSend)}, []device.SGE{{Addr: p.buf + 4096, Length: 64, LKey: p.lkey}}, nil)
				if _, err := a.rcq.Wait(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLinkShmAcrossProcesses: the backend in a process of its own, the
// switch in this one, as `hinic device serve` and `hinic fabric serve`
// with daemons: split. Their rings then wake each other through the
// eventfds passed with the setup, not Go channels; RC and L2 traffic
// both ways must arrive intact, and the switch must name the ports shm.
func TestLinkShmAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 4, ShmNoPoll: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	tb := &testbed{fab: fab, dir: dir}
	sw := fab.Switches()[0]
	for i := 1; i <= 2; i++ {
		tb.cfgs = append(tb.cfgs, vnicConfig(dir, i, sw.SocketPath(i)))
	}
	startBackendProcess(t, tb.cfgs...)
	for i := range 2 {
		tb.guests = append(tb.guests, tb.connect(t, i))
	}
	for _, p := range fab.Status().Switches[0].Ports[:2] {
		if p.Transport != device.TransportShm {
			t.Fatalf("switch port %d: transport %q, want shm", p.Num, p.Transport)
		}
	}
	exchange(t, tb)
}
