package fabric

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// smpPacket builds a directed-route SMP from a CA on the switch's port
// (HopCount 1, already past hop 0, as C14-9:1 has the sending CA do).
func smpPacket(t *testing.T, method uint8, attr uint16, am uint32, tid uint64, data func([]byte)) []byte {
	return smpPath(t, []byte{1}, method, attr, am, tid, data)
}

// smpPath builds a directed-route SMP for the node at the end of path
// (InitialPath[1..]: the egress port at each hop, the CA's own first).
func smpPath(t *testing.T, path []byte, method uint8, attr uint16, am uint32, tid uint64, data func([]byte)) []byte {
	t.Helper()
	mad := make([]byte, proto.MADSize)
	f := proto.SMPFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnDirectedRoute,
		ClassVersion: proto.SMClassVersion, Method: method, HopPointer: 1, HopCount: uint8(len(path)),
		TransactionID: tid, AttributeID: attr, AttributeModifier: am,
		DrSLID: proto.LIDPermissive, DrDLID: proto.LIDPermissive,
	}
	copy(f.InitialPath[1:], path)
	proto.SMP(mad).Encode(&f)
	if data != nil {
		data(mad[proto.SMPDataOffset : proto.SMPDataOffset+64])
	}
	pf := proto.PacketFields{
		Link: proto.LinkIB,
		LRH:  proto.LRHFields{VL: proto.VL15, DLID: proto.LIDPermissive, SLID: proto.LIDPermissive},
		BTH:  proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 0},
		DETH: proto.DETHFields{QKey: 0, SrcQP: 0},
	}
	pf.Payload = mad
	buf := make([]byte, pf.Len())
	n, err := pf.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// sm plays a subnet manager on n: it sends an SMP and returns the
// response's data.
func sm(t *testing.T, n *nic, method uint8, attr uint16, am uint32, data func([]byte)) []byte {
	t.Helper()
	return smAt(t, n, []byte{1}, method, attr, am, data)
}

func smAt(t *testing.T, n *nic, path []byte, method uint8, attr uint16, am uint32, data func([]byte)) []byte {
	t.Helper()
	tid := uint64(time.Now().UnixNano())
	n.send(smpPath(t, path, method, attr, am, tid, data))
	resp := n.recv(2 * time.Second)
	if resp == nil {
		t.Fatalf("no answer to SMP attr %#x am %d", attr, am)
	}
	pkt, err := proto.Parse(resp, proto.LinkIB)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	smp, err := proto.ParseSMP(pkt.Payload)
	if err != nil {
		t.Fatalf("answer SMP: %v", err)
	}
	if smp.TransactionID() != tid || !smp.Direction() || smp.Status() != 0 {
		t.Fatalf("answer to attr %#x am %d: tid %#x dir %v status %#x", attr, am, smp.TransactionID(), smp.Direction(), smp.Status())
	}
	return smp.Data()
}

// TestIBForwarding runs two native IB ports through package ibsw: the
// test, as the subnet manager, activates the ports and programs the LFT
// with directed-route SMPs; data packets then follow the LFT.
func TestIBForwarding(t *testing.T) {
	dir := shortDir(t)
	f := startFabric(t, Config{Pcap: dir, Switches: []SwitchConfig{{
		Ports: 3,
		Port:  []PortConfig{{Num: 1, Link: LinkIB}, {Num: 2, Link: LinkIB}},
	}}})
	sw := f.Switches()[0]
	a := connectLink(t, sw, 1, 1, proto.HelloLinkInfiniBand)
	b := connectLink(t, sw, 2, 2, proto.HelloLinkInfiniBand)

	for _, port := range []uint32{1, 2} {
		for _, state := range []uint8{proto.PortStateArmed, proto.PortStateActive} {
			sm(t, a, proto.MADMethodSet, proto.SMPAttrPortInfo, port, func(d []byte) {
				proto.PortInfo(d).Encode(&proto.PortInfoFields{PortState: state})
			})
		}
	}
	si := sm(t, a, proto.MADMethodGet, proto.SMPAttrSwitchInfo, 0, nil)
	fields := proto.SwitchInfo(si).Fields()
	fields.LinearFDBTop = 2
	sm(t, a, proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, func(d []byte) { proto.SwitchInfo(d).Encode(&fields) })
	sm(t, a, proto.MADMethodSet, proto.SMPAttrLinearForwardingTable, 0, func(d []byte) {
		var lft proto.LinearForwardingTableFields
		for i := range lft.Ports {
			lft.Ports[i] = proto.LFTPortDrop
		}
		lft.Ports[1], lft.Ports[2] = 1, 2
		proto.LinearForwardingTable(d).Encode(&lft)
	})

	ab := ibPacket(t, 2, 1, 0, 256)
	a.send(ab)
	if got := b.recv(2 * time.Second); !bytes.Equal(got, ab) {
		t.Fatalf("port 2 got %x, want %x", got, ab)
	}
	ba := ibPacket(t, 1, 2, 0, 100)
	b.send(ba)
	if got := a.recv(2 * time.Second); !bytes.Equal(got, ba) {
		t.Fatalf("port 1 got %x, want %x", got, ba)
	}
	a.send(ibPacket(t, 3, 1, 0, 64)) // no route
	if got := b.recv(100 * time.Millisecond); got != nil {
		t.Fatalf("unrouted packet delivered: %x", got)
	}
	// An Ethernet frame on an IB port is not IB.
	a.send(ethFrame(bcast, a.mac, -1, 0, 60, 0))
	waitFor(t, "malformed drop", func() bool { return portStatus(sw, 1).Drops["malformed"] > 0 })

	st := sw.Status()
	if st.IB == nil || len(st.IB.LFT) != 2 || st.IB.LFT[0] != (LFTEntry{LID: 1, Port: 1}) || st.IB.LFT[1] != (LFTEntry{LID: 2, Port: 2}) {
		t.Fatalf("IB status %+v", st.IB)
	}
	if st.IB.Ports[1].State != "Active" {
		t.Errorf("port 1 state %s", st.IB.Ports[1].State)
	}
	// Disconnecting tells ibsw the link is down.
	b.c.Close()
	waitFor(t, "port 2 down", func() bool {
		s := sw.Status().IB
		return s.Ports[2].State == "Down"
	})
	f.Close()
	checkPcapLinkType(t, dir+"/sw0-port2.pcap", 147)
	if tshark, err := exec.LookPath("tshark"); err == nil {
		// The capture reads as InfiniBand with the user DLT setting.
		out, err := exec.Command(tshark, "-o", `uat:user_dlts:"User 0 (DLT=147)","infiniband","0","","0",""`,
			"-r", dir+"/sw0-port2.pcap", "-T", "fields", "-e", "infiniband.lrh.dlid", "-e", "infiniband.lrh.slid").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "2\t1") {
			t.Errorf("tshark: %v\n%s", err, out)
		}
	}
}

// TestIBAcrossSwitches routes LIDs across an inter-switch link of IB
// ports: the test, as the SM on a CA of tor1, activates the ports of
// both switches and programs both LFTs through directed routes.
func TestIBAcrossSwitches(t *testing.T) {
	ib := []PortConfig{{Num: 1, Link: LinkIB}, {Num: 4, Link: LinkIB}}
	f := startFabric(t, Config{
		Switches: []SwitchConfig{{Name: "tor1", Ports: 4, Port: ib}, {Name: "tor2", Ports: 4, Port: ib}},
		Links:    []LinkConfig{{A: "tor1:4", B: "tor2:4"}},
	})
	tor1, tor2 := f.Switch("tor1"), f.Switch("tor2")
	a := connectLink(t, tor1, 1, 1, proto.HelloLinkInfiniBand)
	b := connectLink(t, tor2, 1, 2, proto.HelloLinkInfiniBand)
	toTor1, toTor2 := []byte{1}, []byte{1, 4}
	program := func(path []byte, lft map[int]uint8) {
		for _, port := range []uint32{1, 4} {
			for _, state := range []uint8{proto.PortStateArmed, proto.PortStateActive} {
				smAt(t, a, path, proto.MADMethodSet, proto.SMPAttrPortInfo, port, func(d []byte) {
					proto.PortInfo(d).Encode(&proto.PortInfoFields{PortState: state})
				})
			}
		}
		si := proto.SwitchInfo(smAt(t, a, path, proto.MADMethodGet, proto.SMPAttrSwitchInfo, 0, nil)).Fields()
		si.LinearFDBTop = 2
		smAt(t, a, path, proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, func(d []byte) { proto.SwitchInfo(d).Encode(&si) })
		smAt(t, a, path, proto.MADMethodSet, proto.SMPAttrLinearForwardingTable, 0, func(d []byte) {
			var f proto.LinearForwardingTableFields
			for i := range f.Ports {
				f.Ports[i] = proto.LFTPortDrop
			}
			for lid, port := range lft {
				f.Ports[lid] = port
			}
			proto.LinearForwardingTable(d).Encode(&f)
		})
	}
	program(toTor1, map[int]uint8{1: 1, 2: 4})
	program(toTor2, map[int]uint8{1: 4, 2: 1})

	ab := ibPacket(t, 2, 1, 0, 512)
	a.send(ab)
	if got := b.recv(2 * time.Second); !bytes.Equal(got, ab) {
		t.Fatalf("tor2 port 1 got %x", got)
	}
	ba := ibPacket(t, 1, 2, 0, 64)
	b.send(ba)
	if got := a.recv(2 * time.Second); !bytes.Equal(got, ba) {
		t.Fatalf("tor1 port 1 got %x", got)
	}
	if lft := tor2.Status().IB.LFT; len(lft) != 2 || lft[0] != (LFTEntry{LID: 1, Port: 4}) {
		t.Errorf("tor2 LFT %+v", lft)
	}
}
