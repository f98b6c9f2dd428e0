package integration

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// setAddr runs SET_ADDR with the vNIC's MAC (zero: the configured one),
// mtu (0: the configured one) and ips.
func setAddr(t *testing.T, g *guestsim.Guest, mac [6]byte, mtu uint16, n uint32, ips ...[4]byte) error {
	cmd := device.AdminCmd{Opcode: device.CmdSetAddr}
	a := device.CmdSetAddrArgs{MAC: mac, MTU: mtu, NIPv4: n}
	copy(a.IPv4[:], ips)
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = a
	_, err := g.Admin(testCtx(t), &cmd)
	return err
}

// TestSetAddrLive: addresses set after PDs, CQs and QPs exist (as ib_mad
// holds from registration on) replace the IPv4 GIDs in place; RC traffic
// between the new GIDs passes. Another MAC or MTU, more than four
// addresses or an MTU that is no IB MTU are refused and change nothing.
func TestSetAddrLive(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	b := newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	for i, e := range []*rcEnd{a, b} {
		ip := [4]byte{192, 168, 50, byte(i + 1)}
		if err := setAddr(t, e.g, [6]byte{}, 0, 1, ip); err != nil {
			t.Fatalf("guest %d: SET_ADDR with a PD, CQs and a QP: %v", i+1, err)
		}
		gid, err := e.g.QueryGID(ctx, 1)
		if want := [16]byte{10: 0xff, 11: 0xff, 12: ip[0], 13: ip[1], 14: ip[2], 15: ip[3]}; err != nil || gid != want {
			t.Fatalf("guest %d: GID 1 %x, %v; want %x", i+1, gid, err, want)
		}
		e.gid = gid
	}
	for _, c := range []struct {
		name string
		mac  [6]byte
		mtu  uint16
		n    uint32
		st   uint16
	}{
		{"five addresses", [6]byte{}, 0, 5, device.StEINVAL},
		{"MTU 1000", [6]byte{}, 1000, 1, device.StEINVAL},
		{"another MTU", [6]byte{}, 4096, 1, device.StEBUSY},
		{"another MAC", [6]byte{0x02, 0x99, 0, 0, 0, 1}, 0, 1, device.StEINVAL}, // never the guest's to choose
	} {
		t.Run(c.name, func(t *testing.T) {
			err := setAddr(t, a.g, c.mac, c.mtu, c.n, [4]byte{172, 16, 0, 1})
			wantStatus(t, err, c.st)
			if gid, err := a.g.QueryGID(ctx, 1); err != nil || gid != a.gid {
				t.Errorf("GID 1 %x, %v after a refused SET_ADDR; want %x", gid, err, a.gid)
			}
		})
	}
	// The old address left the table: one IPv4 GID, after the
	// link-local one.
	if _, err := a.g.QueryGID(ctx, 2); err == nil {
		t.Error("GID 2 exists after SET_ADDR with one address")
	}
	if p, err := a.g.QueryPort(ctx); err != nil || p.ActiveMTU != uint32(rdma.MTU1024) {
		t.Errorf("QUERY_PORT %+v, %v: want the active MTU unchanged (1024)", p, err)
	}

	// RC between the new GIDs, both ways.
	a.connect(t, b)
	b.connect(t, a)
	for i, d := range []struct{ s, r *rcEnd }{{a, b}, {b, a}} {
		want := fill(t, d.s.g, d.s.buf, 3000, byte(9+i))
		d.r.qp.PostRecv(uint64(60+i), []device.SGE{{Addr: d.r.buf + 8192, Length: 4096, LKey: d.r.lkey}})
		d.s.qp.PostSend(device.SendWQE{WRID: uint64(70 + i), Opcode: uint8(rdma.WRSend),
			SendFlags: uint16(rdma.SendSignaled)}, []device.SGE{{Addr: d.s.buf, Length: 3000, LKey: d.s.lkey}}, nil)
		wantCQE(t, d.s.scq, rdma.WCSuccess, rdma.WCSend, uint64(70+i))
		wantCQE(t, d.r.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(60+i))
		if got := read(t, d.r.g, d.r.buf+8192, 3000); !bytes.Equal(got, want) {
			t.Fatalf("SEND %d: payload differs", i)
		}
	}
	// Frames to the new GIDs are taken, not dropped as another node's:
	// a dropped frame shows as a sequence NAK. Retransmissions are no
	// evidence either way: the receive doorbell may be handled after
	// the SEND arrives (an RNR NAK and a retry), most under load.
	for i, st := range tb.srv.Status().VNICs {
		if st.Counters.WQEErrors != 0 || st.Engine.RxNotForUs+st.Engine.RxAddrMismatch+st.Engine.SeqNAKsReceived != 0 {
			t.Errorf("vNIC %d: %d WQE errors, %d frames not for us, %d address mismatches, %d sequence NAKs",
				i+1, st.Counters.WQEErrors, st.Engine.RxNotForUs, st.Engine.RxAddrMismatch, st.Engine.SeqNAKsReceived)
		}
	}
}
