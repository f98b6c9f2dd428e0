package fabric

import (
	"fmt"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
)

// newBareSwitch builds a switch without sockets whose ports are forced
// up, so the pipeline can be driven directly: frames go in through
// receive and are taken out of the egress queues with drain.
func newBareSwitch(t testing.TB, sc SwitchConfig) *Switch {
	t.Helper()
	f, err := New(Config{RunDir: "/nonexistent", Switches: []SwitchConfig{sc}, Clock: clocktest.NewAt(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	sw := f.Switches()[0]
	for _, p := range sw.ports {
		p.eg.setUp(true, nil)
		p.up.Store(true)
		if p.cfg.link == LinkIB {
			sw.ib.SetPortLink(p.cfg.num, true)
		}
	}
	t.Cleanup(func() { f.Close() })
	return sw
}

// drain plays every port's tx: it dequeues everything queued and
// releases it, returning the frames' lengths per port.
func drain(sw *Switch, now time.Time) [][]int {
	out := make([]*frame, 64)
	lens := make([][]int, len(sw.ports))
	for i, p := range sw.ports {
		for {
			n, _ := p.eg.dequeue(out, now)
			if n == 0 {
				break
			}
			for _, f := range out[:n] {
				lens[i] = append(lens[i], len(f.buf))
				sw.release(f)
			}
		}
	}
	return lens
}

func (sw *Switch) inject(num int, b []byte, now time.Time) {
	f := sw.pool.get()
	f.buf = f.buf[:copy(f.buf, b)]
	if len(b) > len(f.buf) {
		// Longer than any buffer: what the socket layer reports as
		// truncated.
		sw.ports[num-1].ctr.drops[DropOversize].Add(1)
		sw.pool.put(f)
		return
	}
	sw.receive(sw.ports[num-1], f, now)
}

// FuzzReceive feeds arbitrary frames to the ingress pipeline of every
// port kind. Properties: no panic, every frame is counted, and once the
// queues are drained every byte charged to an ingress port has been
// released (the PFC accounting cannot leak).
func FuzzReceive(f *testing.F) {
	mac1, mac2 := macN(1), macN(2)
	// Seeds: plain, tagged, RoCEv2 (ECT), PFC, PAUSE, runt, bad IP, IB.
	f.Add(uint8(0), ethFrame(bcast, mac1, -1, 0, 60, 0))
	f.Add(uint8(0), ethFrame(mac2, mac1, 100, 3, 300, 1))
	f.Add(uint8(1), roceFrame(f, mac1, mac2, 26<<2|2, 100, 1))
	pfc := make([]byte, 60)
	proto.BuildPFC(pfc, mac1, &proto.PFCFields{Enable: 8, Time: [8]uint16{3: 0xFFFF}})
	f.Add(uint8(0), pfc)
	pause := make([]byte, 60)
	proto.Ethernet(pause).Encode(&proto.EthernetFields{Dst: proto.PFCDestMAC, Src: mac1, EtherType: proto.EtherTypeMACControl})
	proto.MACControl(pause[14:]).EncodePause(1)
	f.Add(uint8(0), pause)
	f.Add(uint8(0), []byte{1, 2, 3})
	bad := ethFrame(mac2, mac1, -1, 0, 60, 0)
	bad[12], bad[13], bad[14] = 0x08, 0x00, 0x45
	f.Add(uint8(2), bad)
	f.Add(uint8(3), ibPacket(f, 2, 1, 0, 64))

	sw := newBareSwitch(f, SwitchConfig{
		Ports: 4, MaxFrame: 2048,
		Port: []PortConfig{
			{Num: 3, Faults: FaultsConfig{Duplicate: 0.3, Reorder: 0.3, Corrupt: 0.3, Drop: 0.1}},
			{Num: 4, Link: LinkIB},
		},
	})
	now := time.Unix(0, 0)
	f.Fuzz(func(t *testing.T, port uint8, data []byte) {
		num := int(port)%len(sw.ports) + 1
		p := sw.ports[num-1]
		before := p.ctr.rxFrames.Load() + p.ctr.drops[DropOversize].Load()
		sw.inject(num, data, now)
		if after := p.ctr.rxFrames.Load() + p.ctr.drops[DropOversize].Load(); after == before {
			t.Fatal("frame not counted")
		}
		drain(sw, now)
		// PFC frames from the input may have paused classes: lift the
		// pauses (the clock never moves here) and send what they held.
		for _, q := range sw.ports {
			q.eg.mu.Lock()
			q.eg.paused = 0
			q.eg.mu.Unlock()
		}
		drain(sw, now)
		for _, q := range sw.ports {
			if q.faults != nil && q.faults.held != nil {
				continue // a reordered frame is still held back
			}
			for tc := range NumTC {
				if v := q.acct[tc].Load(); v != 0 {
					t.Fatalf("port %d class %d: %d bytes still charged", q.cfg.num, tc, v)
				}
			}
		}
	})
}

// TestPipelineZeroAlloc asserts that forwarding a known unicast frame
// allocates nothing.
func TestPipelineZeroAlloc(t *testing.T) {
	sw := newBareSwitch(t, SwitchConfig{Ports: 2})
	now := time.Unix(0, 0)
	a, b := macN(1), macN(2)
	sw.inject(2, ethFrame(bcast, b, -1, 0, 60, 0), now)
	drain(sw, now)
	fr := roceFrame(t, b, a, 26<<2|2, 1000, 0)
	out := make([]*frame, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		f := sw.pool.get()
		f.buf = f.buf[:copy(f.buf, fr)]
		sw.receive(sw.ports[0], f, now)
		n, _ := sw.ports[1].eg.dequeue(out, now)
		for _, f := range out[:n] {
			sw.release(f)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per forwarded frame", allocs)
	}
}

// BenchmarkPipeline measures the Ethernet pipeline without sockets:
// ingress (parse, learn, look up, classify, enqueue) and the scheduler's
// dequeue, for a known unicast RoCEv2 flow.
func BenchmarkPipeline(b *testing.B) {
	for _, size := range []int{64, 1500, 4200} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			sw := newBareSwitch(b, SwitchConfig{Ports: 2})
			now := time.Unix(0, 0)
			ma, mb := macN(1), macN(2)
			sw.inject(2, ethFrame(bcast, mb, -1, 0, 60, 0), now)
			drain(sw, now)
			var fr []byte
			if size < 100 {
				fr = ethFrame(mb, ma, 0, 3, size, 1)
			} else {
				fr = roceFrame(b, mb, ma, 26<<2|2, size-roceOverhead, 0)
			}
			out := make([]*frame, 32)
			b.SetBytes(int64(len(fr)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f := sw.pool.get()
				f.buf = f.buf[:copy(f.buf, fr)]
				sw.receive(sw.ports[0], f, now)
				if i%16 == 15 {
					for {
						n, _ := sw.ports[1].eg.dequeue(out, now)
						if n == 0 {
							break
						}
						for _, f := range out[:n] {
							sw.release(f)
						}
					}
				}
			}
		})
	}
}

// roceOverhead is the size of Ethernet + IPv4 + UDP + BTH + ICRC.
const roceOverhead = 14 + 20 + 8 + 12 + 4

func TestScheduler(t *testing.T) {
	s := switchSettings{queues: QueueConfig{Frames: 1000, Bytes: 1 << 30}}
	s.strict[7] = true
	s.weights = [NumTC]int{1, 3, 1, 1, 1, 1, 1, 1}
	var e egress
	e.init(&s, 1, 1000)
	e.up = true
	now := time.Unix(0, 0)
	push := func(tc uint8, n, size int) {
		for range n {
			if r := e.enqueue(&frame{buf: make([]byte, size), tc: tc, in: -1}, nil, now); r != enqOK {
				t.Fatal(r)
			}
		}
	}
	// Strict TC7 goes first; then TC0 and TC1 share 1:3 by bytes.
	push(0, 400, 500)
	push(1, 400, 500)
	push(7, 5, 100)
	out := make([]*frame, 200)
	n, _ := e.dequeue(out, now)
	if n != 200 {
		t.Fatal(n)
	}
	for i := range 5 {
		if out[i].tc != 7 {
			t.Fatalf("frame %d from TC%d before strict TC7", i, out[i].tc)
		}
	}
	var bytes [NumTC]int
	for _, f := range out[5:] {
		bytes[f.tc] += len(f.buf)
	}
	ratio := float64(bytes[1]) / float64(bytes[0])
	if ratio < 2.5 || ratio > 3.5 {
		t.Errorf("TC1:TC0 = %d:%d bytes (%.2f), want about 3", bytes[1], bytes[0], ratio)
	}
	// A paused class is skipped; the other keeps the link.
	e.pause(1<<1, time.Second, now)
	n, wake := e.dequeue(out[:50], now)
	for _, f := range out[:n] {
		if f.tc == 1 {
			t.Fatal("paused class dequeued")
		}
	}
	if wake.IsZero() && e.q[0].n == 0 {
		t.Error("no wake time while a paused class waits")
	}
}

// ibPacket builds a native IB UD SEND packet on VL0 from slid to dlid.
func ibPacket(t testing.TB, dlid, slid uint16, vl uint8, payload int) []byte {
	t.Helper()
	pf := proto.PacketFields{
		Link: proto.LinkIB,
		LRH:  proto.LRHFields{VL: vl, DLID: dlid, SLID: slid},
		BTH:  proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 0x22},
		DETH: proto.DETHFields{QKey: 0x11111111, SrcQP: 0x33},
	}
	pf.Payload = make([]byte, payload)
	buf := make([]byte, pf.Len())
	n, err := pf.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
