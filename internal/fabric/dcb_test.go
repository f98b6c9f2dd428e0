package fabric

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
)

// seqFrame is a priority-tagged frame of 1000 bytes carrying the
// sender's id and a sequence number.
func seqFrame(dst, src [6]byte, pcp uint8, seq uint32) []byte {
	f := ethFrame(dst, src, 0, pcp, 1000, 0)
	binary.BigEndian.PutUint32(f[18:], seq)
	return f
}

// TestPFCIncast sends two ports' traffic to a third that does not read:
// the lossless class (TC3) must lose nothing and make the switch send
// PFC XOFF (then XON) to both senders; the lossy class (TC0) overflows
// and its drops are counted.
func TestPFCIncast(t *testing.T) {
	const nLossless, lossyPerLossless = 300, 3
	f := startFabric(t, Config{
		Ports: 3, SocketBuffer: 32 << 10,
		Switches: []SwitchConfig{{
			Queues: QueueConfig{Frames: 32, Bytes: 64 << 10},
			PFC:    PFCConfig{XOFF: 16 << 10, XON: 8 << 10},
		}},
	})
	sw := f.Switches()[0]
	a, b, c := connect(t, sw, 1, 1), connect(t, sw, 2, 2), connect(t, sw, 3, 3)
	for _, n := range []*nic{a, b, c} {
		n.c.SetReadBuffer(32 << 10)
		n.c.SetWriteBuffer(32 << 10)
	}
	c.send(ethFrame(bcast, c.mac, -1, 0, 60, 0))
	a.recvData(time.Second)
	b.recvData(time.Second)

	var wg sync.WaitGroup
	for _, s := range []*nic{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range nLossless {
				if _, err := s.c.Write(seqFrame(c.mac, s.mac, 3, uint32(i))); err != nil {
					t.Errorf("%s: %v", s.name, err)
					return
				}
				for range lossyPerLossless {
					if _, err := s.c.Write(seqFrame(c.mac, s.mac, 0, 0)); err != nil {
						t.Errorf("%s: %v", s.name, err)
						return
					}
				}
			}
		}()
	}
	// Congestion: the lossy class overflows and the senders are paused.
	waitFor(t, "tail drops and XOFF to both senders", func() bool {
		return portStatus(sw, 3).Drops["queue-full"] > 0 &&
			portStatus(sw, 1).PFCSent > 0 && portStatus(sw, 2).PFCSent > 0
	})
	// Now c drains everything.
	next := map[byte]uint32{1: 0, 2: 0}
	lossy := 0
	deadline := time.Now().Add(20 * time.Second)
	for next[1] < nLossless || next[2] < nLossless {
		if time.Now().After(deadline) {
			t.Fatalf("lossless frames missing: got %v of %d each", next, nLossless)
		}
		fr := c.recvData(time.Second)
		if fr == nil {
			continue
		}
		pcp := fr[14] >> 5
		if pcp == 0 {
			lossy++
			continue
		}
		from, seq := fr[11], binary.BigEndian.Uint32(fr[18:])
		if seq != next[from] {
			t.Fatalf("lossless frame from %d: seq %d, want %d (lost or reordered)", from, seq, next[from])
		}
		next[from]++
	}
	wg.Wait()
	// The rest is lossy traffic: read until nothing more comes.
	for c.recvData(300*time.Millisecond) != nil {
		lossy++
	}
	if st := portStatus(sw, 3); st.QueueFrames != [NumTC]int{} {
		t.Errorf("queues not empty: %v", st.QueueFrames)
	}
	st3 := portStatus(sw, 3)
	t.Logf("lossy: %d delivered, %d dropped", lossy, st3.Drops["queue-full"])
	if got, want := uint64(lossy)+st3.Drops["queue-full"], uint64(2*nLossless*lossyPerLossless); got != want {
		t.Errorf("lossy delivered+dropped = %d, want %d", got, want)
	}
	// By class: the tail drops are all TC0's, the data sent to c is
	// TC0's and TC3's, and the XOFFs sent to a and b paused TC3.
	if cl := st3.Classes; cl[0].QueueFull != st3.Drops["queue-full"] || cl[3].QueueFull != 0 ||
		cl[0].TxFrames != uint64(lossy) || cl[3].TxFrames != 2*nLossless {
		t.Errorf("port 3 by class: %+v; want %d TC0 tail drops, %d TC0 and %d TC3 frames sent",
			cl, st3.Drops["queue-full"], lossy, 2*nLossless)
	}
	for _, n := range []int{1, 2} {
		ps := portStatus(sw, n)
		if ps.Classes[3].PFCSent != ps.PFCSent || ps.Classes[3].PFCSent == 0 {
			t.Errorf("port %d: %d PFC frames sent, %d of them for TC3", n, ps.PFCSent, ps.Classes[3].PFCSent)
		}
	}
	// Both senders got XOFF for priority 3 and, once drained, XON.
	for _, s := range []*nic{a, b} {
		var xoff, xon int
		for {
			fr := s.recv(100 * time.Millisecond)
			if fr == nil {
				break
			}
			if !isMACControl(fr) {
				continue
			}
			pkt, err := proto.Parse(fr, proto.LinkEthernet)
			if err != nil || !pkt.MACControl.IsPFC() {
				t.Fatalf("%s: bad MAC control frame %x", s.name, fr)
			}
			if [6]byte(pkt.Eth.Dst()) != proto.PFCDestMAC {
				t.Errorf("PFC to %x", pkt.Eth.Dst())
			}
			if pkt.MACControl.PFCEnable() != 1<<3 {
				t.Errorf("PFC enable vector %#x, want 0x08", pkt.MACControl.PFCEnable())
			}
			if pkt.MACControl.PFCTime(3) != 0 {
				xoff++
			} else {
				xon++
			}
		}
		if xoff == 0 || xon == 0 {
			t.Errorf("%s: %d XOFF and %d XON frames, want both", s.name, xoff, xon)
		}
	}
	for _, n := range []int{1, 2, 3} {
		st := portStatus(sw, n)
		if n != 3 && st.TotalDrops() != 0 {
			t.Errorf("port %d drops %v", n, st.Drops)
		}
		if len(st.XOFF) != 0 {
			t.Errorf("port %d still in XOFF for %v", n, st.XOFF)
		}
	}
}

// TestPFCReceived checks that the switch obeys PFC from a peer: the
// paused class waits for the quanta (converted at the port's speed) or
// for XON, other classes flow.
func TestPFCReceived(t *testing.T) {
	clk := clocktest.NewAt(time.Unix(0, 0))
	f := startFabric(t, Config{Clock: clk, Switches: []SwitchConfig{{
		Ports: 2, Port: []PortConfig{{Num: 1, Speed: 10e6}}, // 0xFFFF quanta = 3.36 s at 10 Mb/s
	}}})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	a.send(ethFrame(bcast, a.mac, -1, 0, 60, 0))
	b.recvData(time.Second)

	pfc := func(prio int, quanta uint16) []byte {
		buf := make([]byte, 64)
		var pf proto.PFCFields
		pf.Enable = 1 << prio
		pf.Time[prio] = quanta
		n, err := proto.BuildPFC(buf, a.mac, &pf)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	for _, resume := range []string{"timeout", "xon"} {
		t.Run(resume, func(t *testing.T) {
			before := portStatus(sw, 1).PFCRecv
			a.send(pfc(3, 0xFFFF))
			waitFor(t, "pause", func() bool { return len(portStatus(sw, 1).Paused) == 1 })
			if ps := portStatus(sw, 1); ps.PFCRecv != before+1 || ps.Classes[3].PFCRecv != ps.PFCRecv {
				t.Errorf("pfc_received %d (TC3 %d), want %d", ps.PFCRecv, ps.Classes[3].PFCRecv, before+1)
			}
			held := seqFrame(a.mac, b.mac, 3, 1)
			other := seqFrame(a.mac, b.mac, 0, 2)
			b.send(held)
			b.send(other)
			a.expectFrame(other)
			a.expectNothing(50 * time.Millisecond)
			if resume == "timeout" {
				clk.Advance(3 * time.Second)
				a.expectNothing(50 * time.Millisecond)
				clk.Advance(400 * time.Millisecond)
			} else {
				a.send(pfc(3, 0))
			}
			a.expectFrame(held)
		})
	}
	t.Run("pause", func(t *testing.T) {
		buf := make([]byte, 60)
		proto.Ethernet(buf).Encode(&proto.EthernetFields{Dst: proto.PFCDestMAC, Src: a.mac, EtherType: proto.EtherTypeMACControl})
		proto.MACControl(buf[14:]).EncodePause(0xFFFF)
		a.send(buf)
		waitFor(t, "pause", func() bool { return len(portStatus(sw, 1).Paused) == NumTC })
		fr := seqFrame(a.mac, b.mac, 0, 3)
		b.send(fr)
		a.expectNothing(50 * time.Millisecond)
		clk.Advance(4 * time.Second)
		a.expectFrame(fr)
		if portStatus(sw, 1).PauseRecv != 1 {
			t.Error("pause_received not counted")
		}
	})
}

// TestECNMarking congests a lossless class with ECN-capable RoCEv2
// traffic: frames queued past the threshold leave CE-marked, with a
// valid IPv4 checksum and a still valid ICRC.
func TestECNMarking(t *testing.T) {
	const n = 400
	f := startFabric(t, Config{
		Ports: 2, SocketBuffer: 32 << 10,
		Switches: []SwitchConfig{{ECN: ECNConfig{KMin: 8 << 10, KMax: 8 << 10}}},
	})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	b.c.SetReadBuffer(32 << 10)
	b.send(ethFrame(bcast, b.mac, -1, 0, 60, 0))
	a.recvData(time.Second)

	// DSCP 26 (TC3, lossless), ECT(0); DSCP 26 and Not-ECT are never marked.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			tos := uint8(26<<2 | proto.ECNECT0)
			if i%4 == 3 {
				tos = 26 << 2
			}
			if _, err := a.c.Write(roceFrame(t, b.mac, a.mac, tos, 1000, uint32(i))); err != nil {
				t.Errorf("send: %v", err)
				return
			}
		}
	}()
	waitFor(t, "marks", func() bool { return portStatus(sw, 2).ECNMarked > 0 })
	marked := 0
	for i := range n {
		fr := b.recvData(5 * time.Second)
		if fr == nil {
			t.Fatalf("frame %d missing", i)
		}
		pkt, err := proto.Parse(fr, proto.LinkEthernet)
		if err != nil || pkt.Type != proto.FrameRoCEv2 {
			t.Fatalf("frame %d: %v %v", i, pkt.Type, err)
		}
		if got := pkt.BTH.PSN(); got != proto.PSN(i) {
			t.Fatalf("frame %d has PSN %d", i, got)
		}
		if !pkt.ICRCValid() {
			t.Fatalf("frame %d: ICRC invalid after the switch", i)
		}
		if pkt.IPv4.CalculateChecksum() != pkt.IPv4.Checksum() {
			t.Fatalf("frame %d: IPv4 checksum wrong", i)
		}
		switch pkt.IPv4.ECN() {
		case proto.ECNCE:
			marked++
			if i%4 == 3 {
				t.Fatalf("frame %d: Not-ECT frame marked", i)
			}
		case proto.ECNNotECT:
			if i%4 != 3 {
				t.Fatalf("frame %d lost its ECT", i)
			}
		}
		if pkt.IPv4.DSCP() != 26 {
			t.Fatalf("frame %d: DSCP %d", i, pkt.IPv4.DSCP())
		}
	}
	<-done
	st := portStatus(sw, 2)
	if marked == 0 || uint64(marked) != st.ECNMarked {
		t.Errorf("%d frames arrived marked, status says %d", marked, st.ECNMarked)
	}
	if st.Classes[3].ECNMarked != st.ECNMarked {
		t.Errorf("%d ECN marks, %d of them in TC3", st.ECNMarked, st.Classes[3].ECNMarked)
	}
	if st.TotalDrops() != 0 || portStatus(sw, 1).TotalDrops() != 0 {
		t.Errorf("drops on a lossless class: %v %v", st.Drops, portStatus(sw, 1).Drops)
	}
	t.Logf("%d of %d marked", marked, n)
}

// TestPauseUntrusted: a port without trust-pause drops the PFC and PAUSE
// frames it receives and counts them (drop reason mac-control): the
// switch's egress to it is not paused and its traffic still flows.
func TestPauseUntrusted(t *testing.T) {
	untrusted := false
	clk := clocktest.NewAt(time.Unix(0, 0))
	f := startFabric(t, Config{Clock: clk, Switches: []SwitchConfig{{
		Ports: 2, Port: []PortConfig{{Num: 1, TrustPause: &untrusted}},
	}}})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	a.send(ethFrame(bcast, a.mac, -1, 0, 60, 0))
	b.recvData(time.Second)

	pfcBuf := make([]byte, 64)
	pf := proto.PFCFields{Enable: 0xFF}
	for i := range pf.Time {
		pf.Time[i] = 0xFFFF
	}
	n, err := proto.BuildPFC(pfcBuf, a.mac, &pf)
	if err != nil {
		t.Fatal(err)
	}
	pause := make([]byte, 60)
	proto.Ethernet(pause).Encode(&proto.EthernetFields{Dst: proto.PFCDestMAC, Src: a.mac, EtherType: proto.EtherTypeMACControl})
	proto.MACControl(pause[14:]).EncodePause(0xFFFF)
	for i, fr := range [][]byte{pfcBuf[:n], pause} {
		a.send(fr)
		waitFor(t, "mac-control drop", func() bool { return portStatus(sw, 1).Drops["mac-control"] == uint64(i+1) })
	}
	// Frames sent after the two dropped ones: the port was not paused.
	fr := seqFrame(a.mac, b.mac, 3, 1)
	b.send(fr)
	a.expectFrame(fr)
	if ps := portStatus(sw, 1); len(ps.Paused) != 0 || ps.PFCRecv != 0 || ps.PauseRecv != 0 {
		t.Errorf("untrusted MAC Control obeyed: paused %v, pfc %d, pause %d", ps.Paused, ps.PFCRecv, ps.PauseRecv)
	}
}

// TestTrustPauseDefaults: a qemu-stream port (a stock guest) distrusts
// PAUSE/PFC unless trust-pause says otherwise; a seqpacket port (a device
// backend or another switch) trusts them unless told not to.
func TestTrustPauseDefaults(t *testing.T) {
	yes, no := true, false
	c := Config{RunDir: t.TempDir(), Switches: []SwitchConfig{{Ports: 5, Port: []PortConfig{
		{Num: 1, Kind: KindQEMUStream},
		{Num: 2, Kind: KindQEMUStream, TrustPause: &yes},
		{Num: 3, TrustPause: &no},
		{Num: 4, PVID: 2},
	}}}}
	sws, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false, true, true} {
		if got := sws[0].ports[i].trustPause; got != want {
			t.Errorf("port %d: trust-pause %v, want %v", i+1, got, want)
		}
	}
}

// TestDefaultQueueHoldsBurst: with the default queue sizes, a lossy burst
// that fits in the byte budget (800 frames of 1000 bytes into a port that
// does not read) is queued whole, not tail-dropped on a frame count. A
// kernel-bypass NIC posts such a burst (perftest's 500-message UD
// multicast) faster than a loaded receiver drains it.
func TestDefaultQueueHoldsBurst(t *testing.T) {
	const n = 800
	f := startFabric(t, Config{Ports: 2, SocketBuffer: 32 << 10})
	sw := f.Switches()[0]
	a, c := connect(t, sw, 1, 1), connect(t, sw, 2, 2)
	for _, s := range []*nic{a, c} {
		s.c.SetReadBuffer(32 << 10)
		s.c.SetWriteBuffer(32 << 10)
	}
	c.send(ethFrame(bcast, c.mac, -1, 0, 60, 0))
	a.recvData(time.Second)
	for i := range n {
		if _, err := a.c.Write(seqFrame(c.mac, a.mac, 0, uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the burst in the switch", func() bool {
		return portStatus(sw, 1).RxFrames >= n
	})
	if d := portStatus(sw, 2).Drops["queue-full"]; d != 0 {
		t.Fatalf("%d of %d frames tail-dropped", d, n)
	}
	for i := range n {
		fr := c.recvData(2 * time.Second)
		if fr == nil {
			t.Fatalf("frame %d of %d missing", i, n)
		}
		if seq := binary.BigEndian.Uint32(fr[18:]); seq != uint32(i) {
			t.Fatalf("frame %d: seq %d", i, seq)
		}
	}
}
