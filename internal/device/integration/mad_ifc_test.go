package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// localSMP builds a directed-route SMP to the port itself (HopCount 0),
// as ib_mad hands it to process_mad: HopPointer already 1.
func localSMP(method uint8, attr uint16, data []byte) []byte {
	m := make([]byte, proto.MADSize)
	proto.SMP(m).Encode(&proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnDirectedRoute,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: 0x77, AttributeID: attr, HopPointer: 1,
		DrSLID: proto.SMPPermissiveLID, DrDLID: proto.SMPPermissiveLID})
	copy(proto.SMP(m).Data(), data)
	return m
}

// TestIBMADIfc drives an InfiniBand vNIC's SMA through MAD_IFC as an SM
// on the guest's own port does (OpenSM's first SMPs): NodeInfo, then
// PortInfo Sets that give the port a LID and take it to Active, each
// change reported on the event queue; then the input the command
// refuses.
func TestIBMADIfc(t *testing.T) {
	tb := newIBTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	g.Events()

	r, err := g.MADIfc(ctx, localSMP(proto.MADMethodGet, proto.SMPAttrNodeInfo, nil))
	if err != nil || r == nil {
		t.Fatalf("NodeInfo: answer %v, %v", r != nil, err)
	}
	s := proto.SMP(r)
	ni := proto.NodeInfo(s.Data())
	if s.Method() != proto.MADMethodGetResp || !s.Direction() || s.HopPointer() != 0 || s.TransactionID() != 0x77 ||
		ni.NodeGUID() != tb.cfgs[0].NodeGUID || ni.NodeType() != proto.NodeTypeCA {
		t.Fatalf("NodeInfo answer: method %#x D %v hp %d tid %#x GUID %#x type %d", s.Method(), s.Direction(),
			s.HopPointer(), s.TransactionID(), ni.NodeGUID(), ni.NodeType())
	}
	r, err = g.MADIfc(ctx, localSMP(proto.MADMethodGet, proto.SMPAttrPortInfo, nil))
	if err != nil || r == nil {
		t.Fatalf("PortInfo: answer %v, %v", r != nil, err)
	}
	pi := proto.PortInfo(proto.SMP(r).Data()).Fields()
	if pi.PortState != proto.PortStateInit || pi.LID != 0 {
		t.Fatalf("PortInfo before the SM: state %d LID %d", pi.PortState, pi.LID)
	}
	set := func(pi proto.PortInfoFields) uint16 {
		t.Helper()
		b := make([]byte, 64)
		proto.PortInfo(b).Encode(&pi)
		r, err := g.MADIfc(ctx, localSMP(proto.MADMethodSet, proto.SMPAttrPortInfo, b))
		if err != nil || r == nil {
			t.Fatalf("Set PortInfo: answer %v, %v", r != nil, err)
		}
		return proto.SMP(r).Status()
	}
	pi.LID, pi.MasterSMLID, pi.PortState = 7, 7, proto.PortStateNoChange
	if st := set(pi); st != 0 {
		t.Fatalf("Set LID: status %#x", st)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := g.WaitEvent(wctx, device.EvLIDChange); err != nil {
		t.Fatal(err)
	}
	for _, st := range []uint8{proto.PortStateArmed, proto.PortStateActive} {
		pi.PortState = st
		if s := set(pi); s != 0 {
			t.Fatalf("Set PortState %d: status %#x", st, s)
		}
	}
	if _, err := g.WaitEvent(wctx, device.EvPortActive); err != nil {
		t.Fatal(err)
	}
	if pa, err := g.QueryPort(ctx); err != nil || pa.LID != 7 || pa.SMLID != 7 || pa.State != uint32(rdma.PortActive) {
		t.Fatalf("port after the Sets: %+v %v", pa, err)
	}
	// A response is not the SMA's: no answer.
	resp := localSMP(proto.MADMethodGetResp, proto.SMPAttrNodeInfo, nil)
	if r, err := g.MADIfc(ctx, resp); r != nil || err != nil {
		t.Fatalf("response: answer %v, %v", r != nil, err)
	}

	in, err := g.Alloc(device.MADSize, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.Alloc(device.MADSize, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	far := uint64(1) << 50
	far2 := localSMP(proto.MADMethodGet, proto.SMPAttrNodeInfo, nil)
	proto.SMP(far2).Encode(&proto.SMPFields{BaseVersion: 1, MgmtClass: proto.MgmtClassSubnDirectedRoute, ClassVersion: 1,
		Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, HopCount: 1,
		DrSLID: proto.SMPPermissiveLID, DrDLID: proto.SMPPermissiveLID})
	get := localSMP(proto.MADMethodGet, proto.SMPAttrNodeInfo, nil)
	for _, c := range []struct {
		name    string
		mad     []byte
		port    uint32
		inGPA   uint64
		respGPA uint64
		respLen uint32
		want    uint16
	}{
		{"port 2", get, 2, in, out, device.MADSize, device.StEINVAL},
		{"short response buffer", get, 1, in, out, device.MADSize - 1, device.StEINVAL},
		{"MAD outside RAM", get, 1, far, out, device.MADSize, device.StEFAULT},
		{"answer outside RAM", get, 1, in, far, device.MADSize, device.StEFAULT},
		{"route beyond the port", far2, 1, in, out, device.MADSize, device.StEINVAL},
	} {
		if err := g.RAM().WriteAt(c.mad, in); err != nil {
			t.Fatal(err)
		}
		cmd := device.AdminCmd{Opcode: device.CmdMADIfc, Handle: c.port, RespGPA: c.respGPA, RespLen: c.respLen}
		*device.PayloadOf[device.CmdMADIfcArgs](&cmd) = device.CmdMADIfcArgs{InGPA: c.inGPA}
		_, err := g.Admin(ctx, &cmd)
		var se *guestsim.StatusError
		if !errors.As(err, &se) || se.Status != c.want {
			t.Errorf("%s: %v, want status %d", c.name, err, c.want)
		}
	}
	// The device still answers.
	if r, err := g.MADIfc(ctx, get); err != nil || r == nil {
		t.Fatalf("NodeInfo after the refusals: answer %v, %v", r != nil, err)
	}
}

// TestMADIfcRoCE: a RoCE port has no SMA.
func TestMADIfcRoCE(t *testing.T) {
	tb := newTestbed(t, 1)
	r, err := tb.guests[0].MADIfc(testCtx(t), localSMP(proto.MADMethodGet, proto.SMPAttrNodeInfo, nil))
	var se *guestsim.StatusError
	if r != nil || !errors.As(err, &se) || se.Status != device.StEOPNOTSUPP {
		t.Fatalf("answer %v, %v; want EOPNOTSUPP", r != nil, err)
	}
}

// TestSetPortCap: SET_PORT_CAP (ABI 1.6) puts the host's IsSM into an
// InfiniBand vNIC's PortInfo, as an SM elsewhere reads it, and takes it
// out again; a bit a host cannot claim, another port and a RoCE vNIC are
// refused.
func TestSetPortCap(t *testing.T) {
	tb := newIBTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	capMask := func() uint32 {
		t.Helper()
		r, err := g.MADIfc(ctx, localSMP(proto.MADMethodGet, proto.SMPAttrPortInfo, nil))
		if err != nil || r == nil {
			t.Fatalf("PortInfo: answer %v, %v", r != nil, err)
		}
		return proto.PortInfo(proto.SMP(r).Data()).Fields().CapabilityMask
	}
	setCap := func(g *guestsim.Guest, port, mask uint32) error {
		cmd := device.AdminCmd{Opcode: device.CmdSetPortCap, Handle: port}
		*device.PayloadOf[device.CmdPortCapArgs](&cmd) = device.CmdPortCapArgs{CapMask: mask}
		_, err := g.Admin(ctx, &cmd)
		return err
	}
	base := capMask()
	if base&proto.PortCapIsSM != 0 {
		t.Fatalf("IsSM before any claim: %#x", base)
	}
	if err := setCap(g, 1, proto.PortCapIsSM); err != nil || capMask() != base|proto.PortCapIsSM {
		t.Fatalf("IsSM: %v, mask %#x", err, capMask())
	}
	if err := setCap(g, 1, 0); err != nil || capMask() != base {
		t.Fatalf("no IsSM: %v, mask %#x", err, capMask())
	}
	var se *guestsim.StatusError
	for name, c := range map[string]struct {
		g          *guestsim.Guest
		port, mask uint32
		want       uint16
	}{
		"IsTrapSupported": {g, 1, proto.PortCapIsTrapSupported, device.StEINVAL},
		"port 2":          {g, 2, proto.PortCapIsSM, device.StEINVAL},
		"RoCE":            {newTestbed(t, 1).guests[0], 1, proto.PortCapIsSM, device.StEOPNOTSUPP},
	} {
		if err := setCap(c.g, c.port, c.mask); !errors.As(err, &se) || se.Status != c.want {
			t.Errorf("%s: %v, want status %d", name, err, c.want)
		}
	}
	if capMask() != base {
		t.Errorf("mask %#x after the refusals, want %#x", capMask(), base)
	}
}
