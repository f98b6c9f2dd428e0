package rdma_test

import (
	"errors"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

func TestCreateAH(t *testing.T) {
	p := newPair(t, pairOpts{})
	d, pd := p.a.dev, p.a.pd
	peer, err := p.b.dev.QueryGID(1)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := d.QueryGID(1)
	mcast4 := [16]byte{10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 3} // ::ffff:239.1.2.3 is unicast-shaped
	mcast6 := [16]byte{0: 0xff, 1: 0x0e, 15: 1}
	global := func(dgid [16]byte, sgid uint8, dmac [6]byte) rdma.AHAttr {
		return rdma.AHAttr{IsGlobal: true, DMAC: dmac, GRH: rdma.GlobalRoute{DGID: dgid, SGIDIndex: sgid, HopLimit: 64}}
	}
	tests := []struct {
		name string
		attr rdma.AHAttr
		ok   bool
	}{
		{"unicast with DMAC", global(peer, 1, p.b.mac), true},
		{"loopback without DMAC", global(own, 1, [6]byte{}), true},
		{"unicast without DMAC", global(peer, 1, [6]byte{}), false},
		{"no GRH on RoCE", rdma.AHAttr{DMAC: p.b.mac}, false},
		{"SGID index outside table", global(peer, 200, p.b.mac), false},
		{"zero DGID", global([16]byte{}, 1, p.b.mac), false},
		{"IPv4 SGID to IPv6 DGID", global(mcast6, 1, [6]byte{}), false},
		{"IPv6 multicast from link-local SGID", global(mcast6, 0, [6]byte{}), true},
		{"IPv4-mapped group address is unicast-shaped", global(mcast4, 1, p.b.mac), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ah, err := d.CreateAH(pd, tc.attr)
			if tc.ok != (err == nil) {
				t.Fatalf("CreateAH: %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, rdma.ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
				return
			}
			if ah.Attr().GRH.DGID != tc.attr.GRH.DGID || ah.PD() != pd {
				t.Fatal("attributes not kept")
			}
			if err := ah.Destroy(); err != nil {
				t.Fatal(err)
			}
			if err := ah.Destroy(); !errors.Is(err, rdma.ErrInvalid) {
				t.Fatalf("second Destroy: %v", err)
			}
		})
	}
}

func TestAHHoldsPD(t *testing.T) {
	p := newPair(t, pairOpts{})
	d := p.a.dev
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := p.b.dev.QueryGID(1)
	ah, err := d.CreateAH(pd, rdma.AHAttr{IsGlobal: true, DMAC: p.b.mac, GRH: rdma.GlobalRoute{DGID: peer, SGIDIndex: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); !errors.Is(err, rdma.ErrBusy) {
		t.Fatalf("Dealloc with a live AH: %v, want ErrBusy", err)
	}
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatalf("Dealloc after Destroy: %v", err)
	}
	if _, err := d.CreateAH(pd, rdma.AHAttr{}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("CreateAH on a dead PD: %v", err)
	}
}
