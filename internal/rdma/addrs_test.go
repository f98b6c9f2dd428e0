package rdma_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// sendOnce posts one 64-byte SEND from qa to qb and checks both
// completions.
func sendOnce(t *testing.T, p *pair, qa, qb *rdma.QP, wrid uint64) {
	t.Helper()
	mustPost(t, qb.PostRecv([]rdma.RecvWR{{WRID: wrid, SGList: p.b.sge(4096, 64)}}))
	mustPost(t, qa.PostSend([]rdma.SendWR{{WRID: wrid, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 64)}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], wrid, rdma.WCSuccess, rdma.WCSend)
	wantWC(t, p.poll(p.b.rcq, 1)[0], wrid, rdma.WCSuccess, rdma.WCRecv)
}

func TestSetIPv4WhileResourcesExist(t *testing.T) {
	p := newPair(t, pairOpts{ipv6: true})
	sendOnce(t, p, p.qa, p.qb, 1)
	// Another pair of QPs over the IPv4 GIDs (index 1).
	p.o.ipv6 = false
	qa1, qb1 := p.a.createQP(t, &p.o), p.b.createQP(t, &p.o)
	p.connect(qa1, qb1, p.b)
	p.connect(qb1, qa1, p.a)
	sendOnce(t, p, qa1, qb1, 10)

	ll, _ := p.b.dev.QueryGID(0)
	v6, _ := p.b.dev.QueryGID(2)
	newIP := netip.MustParseAddr("10.42.0.77")
	extra := netip.MustParseAddr("192.168.9.2")
	if err := p.b.dev.SetIPv4([]netip.Addr{newIP, extra}); err != nil {
		t.Fatal(err)
	}
	want := [][16]byte{ll, newIP.As16(), extra.As16(), v6}
	if n := p.b.dev.QueryPort().GIDTableLen; n != len(want) {
		t.Fatalf("GID table has %d entries, want %d", n, len(want))
	}
	for i, w := range want {
		if g, err := p.b.dev.QueryGID(i); err != nil || g != w {
			t.Errorf("GID %d: %x, %v; want %x", i, g, err, w)
		}
	}
	if _, err := p.b.dev.QueryGID(len(want)); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("GID past the table: %v", err)
	}

	// New QPs reach b at its new IPv4 GID (index 1) ...
	qa2, qb2 := p.a.createQP(t, &p.o), p.b.createQP(t, &p.o)
	p.connect(qa2, qb2, p.b)
	p.connect(qb2, qa2, p.a)
	sendOnce(t, p, qa2, qb2, 2)
	// ... and the IPv6 GID moved to index 3 but still routes; the QPs
	// that use it saw no change.
	sendOnce(t, p, p.qa, p.qb, 5)
	qa3, qb3 := p.a.createQP(t, &p.o), p.b.createQP(t, &p.o)
	gid3, _ := p.b.dev.QueryGID(3)
	connectTo(t, p, qa3, qb3, gid3, 2, p.b.mac)
	connectTo(t, p, qb3, qa3, func() [16]byte { g, _ := p.a.dev.QueryGID(2); return g }(), 3, p.a.mac)
	sendOnce(t, p, qa3, qb3, 3)

	// A frame to b's old address is no longer b's: it is dropped, not
	// delivered.
	before := p.b.dev.Counters()
	mustPost(t, qb1.PostRecv([]rdma.RecvWR{{WRID: 4, SGList: p.b.sge(4096, 64)}}))
	mustPost(t, qa1.PostSend([]rdma.SendWR{{WRID: 4, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 64)}}))
	p.settle()
	p.expectNone(p.b.rcq, "a SEND to b's old IPv4 address")
	if after := p.b.dev.Counters(); after.RxPackets != before.RxPackets {
		t.Errorf("b accepted %d packets for its old address", after.RxPackets-before.RxPackets)
	}

	if err := p.b.dev.SetIPv4([]netip.Addr{netip.MustParseAddr("fd00::1")}); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("an IPv6 address as IPv4: %v", err)
	}
	if n := p.b.dev.QueryPort().GIDTableLen; n != len(want) {
		t.Errorf("a refused SetIPv4 changed the table to %d entries", n)
	}
}

// connectTo takes qp to RTS towards remote at dgid, from our GID sgid.
func connectTo(t *testing.T, p *pair, qp, remote *rdma.QP, dgid [16]byte, sgid uint8, dmac [6]byte) {
	t.Helper()
	mtu, _ := rdma.MTUFromBytes(p.o.mtu)
	for _, s := range []struct {
		a    rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QPAccessFlags: p.o.qpAccess},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{rdma.QPAttr{QPState: rdma.QPStateRTR, PathMTU: mtu, DestQPNum: remote.QPN(), RQPSN: remotePSN(remote),
			MaxDestRDAtomic: 16, MinRNRTimer: 12, AHAttr: rdma.AHAttr{IsGlobal: true, PortNum: 1, DMAC: dmac,
				GRH: rdma.GlobalRoute{DGID: dgid, SGIDIndex: sgid, HopLimit: 64, TrafficClass: 26 << 2}}},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
				rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
		{rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: remotePSN(qp), Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 16},
			rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
				rdma.QPAttrMaxQPRDAtomic},
	} {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSetIPv4Concurrent changes the table while traffic flows and
// address handles are built on other goroutines: the race detector checks
// that readers see whole tables.
func TestSetIPv4Concurrent(t *testing.T) {
	p := newPair(t, pairOpts{realClock: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ips := []netip.Addr{netip.MustParseAddr("10.42.0.2")}
			if i%2 == 1 {
				ips = append(ips, netip.MustParseAddr("10.42.1.2"))
			}
			if err := p.b.dev.SetIPv4(ips); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		peer, _ := p.a.dev.QueryGID(1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Index 2 exists in every other table: either an AH or
			// ErrInvalid, never a panic or a torn read.
			ah, err := p.b.dev.CreateAH(p.b.pd, rdma.AHAttr{IsGlobal: true, DMAC: p.a.mac,
				GRH: rdma.GlobalRoute{DGID: peer, SGIDIndex: 2, HopLimit: 64}})
			if err == nil {
				_ = ah.Destroy()
			} else if !errors.Is(err, rdma.ErrInvalid) {
				t.Error(err)
				return
			}
			_ = p.b.dev.QueryPort()
		}
	}()
	for i := uint64(1); i <= 50; i++ {
		sendOnce(t, p, p.qa, p.qb, i)
	}
	close(stop)
	wg.Wait()
}
