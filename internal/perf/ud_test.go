package perf

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/rack"
)

func TestUDWorkloads(t *testing.T) {
	ctx := context.Background()
	r, err := rack.Start(ctx, rack.Config{Hosts: 3, MTU: 1024, MemSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, b := r.Hosts[0], r.Hosts[1]
	res, err := UDPingPong(ctx, a, b, 1024, 50)
	if err != nil || res.Figure <= 0 {
		t.Fatalf("ud pingpong: %+v %v", res, err)
	}
	if _, err := UDPingPong(ctx, a, b, 1025, 1); err == nil {
		t.Fatal("a UD message above the MTU was accepted")
	}
	res, err = UDSendBW(ctx, a, b, 1024, 3000)
	if err != nil || res.Figure <= 0 || !strings.Contains(res.Detail, "3000 of 3000 datagrams delivered (0 lost)") {
		t.Fatalf("ud send bw: %+v %v", res, err)
	}
	res, err = SRQPingPong(ctx, a, b, 4096, 64, 4)
	if err != nil || res.Figure <= 0 {
		t.Fatalf("srq pingpong: %+v %v", res, err)
	}
	res, err = UDMulticast(ctx, r.Hosts, 512, 100)
	if err != nil || res.Figure <= 0 || !strings.Contains(res.Detail, "300 deliveries") {
		t.Fatalf("multicast: %+v %v", res, err)
	}
	// Every device counted its deliveries; the fabric replicated.
	for _, h := range r.Hosts {
		if c := h.Device.Counters(); c.McastDelivered < 100 {
			t.Errorf("%s delivered %d multicast datagrams, want at least 100", h.Name, c.McastDelivered)
		}
	}
}

func TestCheckGRHCatchesWrongAddresses(t *testing.T) {
	area := make([]byte, 40)
	area[20] = 0x45
	copy(area[32:], []byte{10, 42, 0, 1})
	copy(area[36:], []byte{10, 42, 0, 2})
	src, dst := netip.MustParseAddr("10.42.0.1"), netip.MustParseAddr("10.42.0.2")
	if err := checkGRH(area, src, dst); err != nil {
		t.Fatal(err)
	}
	if err := checkGRH(area, dst, src); err == nil {
		t.Fatal("swapped addresses not caught")
	}
	area[3] = 1
	if err := checkGRH(area, src, dst); err == nil {
		t.Fatal("a non-zero first half not caught")
	}
}
