package fabric

import (
	"net"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
)

func TestLearningAndFlooding(t *testing.T) {
	f := startFabric(t, Config{Ports: 4})
	sw := f.Switches()[0]
	a, b, c := connect(t, sw, 1, 1), connect(t, sw, 2, 2), connect(t, sw, 3, 3)

	// Unknown unicast floods to every other up port.
	fr := ethFrame(b.mac, a.mac, -1, 0, 100, 1)
	a.send(fr)
	b.expectFrame(fr)
	c.expectFrame(fr)
	// b answers: a was learnt, so only a gets it.
	fr = ethFrame(a.mac, b.mac, -1, 0, 100, 2)
	b.send(fr)
	a.expectFrame(fr)
	c.expectNothing(50 * time.Millisecond)
	// Now both are known: unicast goes to b only.
	fr = ethFrame(b.mac, a.mac, -1, 0, 100, 3)
	a.send(fr)
	b.expectFrame(fr)
	c.expectNothing(50 * time.Millisecond)
	// Broadcast and multicast flood.
	for _, dst := range [][6]byte{bcast, {0x01, 0x00, 0x5E, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 1}} {
		fr = ethFrame(dst, c.mac, -1, 0, 60, 4)
		c.send(fr)
		a.expectFrame(fr)
		b.expectFrame(fr)
	}
	// A frame for a station on the ingress port is filtered.
	fr = ethFrame(bcast, macN(9), -1, 0, 60, 5)
	a.send(fr) // learns 9 on port 1
	b.expectFrame(fr)
	c.expectFrame(fr)
	a.send(ethFrame(macN(9), a.mac, -1, 0, 60, 6))
	waitFor(t, "filtered drop", func() bool { return portStatus(sw, 1).Drops["filtered"] == 1 })
	// Link-local (LLDP, 01:80:C2:00:00:0E) is not forwarded.
	c.send(ethFrame([6]byte{0x01, 0x80, 0xC2, 0, 0, 0x0E}, c.mac, -1, 0, 60, 7))
	a.expectNothing(50 * time.Millisecond)

	for _, e := range []struct {
		mac  [6]byte
		port int
	}{{a.mac, 1}, {b.mac, 2}, {c.mac, 3}, {macN(9), 1}} {
		if !hasFDB(sw, e.mac, e.port) {
			t.Errorf("FDB lacks %v on port %d: %+v", net.HardwareAddr(e.mac[:]), e.port, sw.Status().FDB)
		}
	}
	// A station that moves is learnt on its new port.
	fr = ethFrame(bcast, macN(9), -1, 0, 60, 8)
	c.send(fr)
	a.expectFrame(fr)
	b.expectFrame(fr)
	if !hasFDB(sw, macN(9), 3) {
		t.Errorf("moved station not relearnt on port 3")
	}
}

func TestAging(t *testing.T) {
	clk := clocktest.NewAt(time.Unix(1000, 0))
	f := startFabric(t, Config{Ports: 3, Clock: clk})
	sw := f.Switches()[0]
	a, b, c := connect(t, sw, 1, 1), connect(t, sw, 2, 2), connect(t, sw, 3, 3)

	fr := ethFrame(bcast, a.mac, -1, 0, 60, 1)
	a.send(fr)
	b.expectFrame(fr)
	c.expectFrame(fr)
	if !hasFDB(sw, a.mac, 1) {
		t.Fatal("a not learnt")
	}
	toA := ethFrame(a.mac, b.mac, -1, 0, 60, 2)
	clk.Advance(DefaultAgingTime - time.Second)
	b.send(toA)
	a.expectFrame(toA)
	c.expectNothing(50 * time.Millisecond) // still known: not flooded

	// b's entry was refreshed just now; a's is 299 s old. One more
	// second and a's expires, b's does not.
	clk.Advance(time.Second)
	if hasFDB(sw, a.mac, 1) {
		t.Fatal("a still in the FDB after the aging time")
	}
	if !hasFDB(sw, b.mac, 2) {
		t.Fatal("b aged out early")
	}
	toA = ethFrame(a.mac, b.mac, -1, 0, 60, 3)
	b.send(toA)
	a.expectFrame(toA)
	c.expectFrame(toA) // unknown again: flooded

	// The sweep removes expired entries from the table itself.
	clk.Advance(DefaultAgingTime)
	n := 0
	sw.fdb.m.Range(func(any, any) bool { n++; return true })
	sw.fdb.mu.Lock()
	learned := sw.fdb.learned
	sw.fdb.mu.Unlock()
	if n != 0 || learned != 0 {
		t.Errorf("%d entries left after sweep (%d counted)", n, learned)
	}
}

func TestVLAN(t *testing.T) {
	f := startFabric(t, Config{Switches: []SwitchConfig{{
		Ports: 4,
		Port: []PortConfig{
			{Num: 3, VLANs: []int{10}},           // member of 1 (pvid) and 10
			{Num: 4, PVID: 20, VLANs: []int{20}}, // access port of VLAN 20
		},
	}}})
	sw := f.Switches()[0]
	a, b, c, d := connect(t, sw, 1, 1), connect(t, sw, 2, 2), connect(t, sw, 3, 3), connect(t, sw, 4, 4)

	fr := ethFrame(bcast, a.mac, 10, 0, 60, 1)
	a.send(fr)
	b.expectFrame(fr)
	c.expectFrame(fr)
	d.expectNothing(50 * time.Millisecond)

	fr = ethFrame(bcast, a.mac, 30, 0, 60, 2) // VLAN 30: not on c or d
	a.send(fr)
	b.expectFrame(fr)
	c.expectNothing(50 * time.Millisecond)
	d.expectNothing(10 * time.Millisecond)

	fr = ethFrame(bcast, d.mac, -1, 0, 60, 3) // untagged on d: VLAN 20
	d.send(fr)
	a.expectFrame(fr)
	b.expectFrame(fr)
	c.expectNothing(50 * time.Millisecond)

	c.send(ethFrame(bcast, c.mac, 30, 0, 60, 4)) // c is not in VLAN 30
	waitFor(t, "vlan drop", func() bool { return portStatus(sw, 3).Drops["vlan"] == 1 })

	// Learning is per VLAN: a in VLAN 10 says nothing of a in VLAN 1.
	a.send(ethFrame(bcast, a.mac, -1, 0, 60, 5))
	b.expectFrame(ethFrame(bcast, a.mac, -1, 0, 60, 5))
	c.expectFrame(ethFrame(bcast, a.mac, -1, 0, 60, 5))
	entries := 0
	for _, e := range sw.Status().FDB {
		if e.MAC == net.HardwareAddr(a.mac[:]).String() {
			entries++
		}
	}
	if entries != 3 { // VLANs 1, 10, 30
		t.Errorf("a has %d FDB entries, want 3: %+v", entries, sw.Status().FDB)
	}
}

func TestStaticEntries(t *testing.T) {
	f := startFabric(t, Config{Switches: []SwitchConfig{{
		Ports:  3,
		Static: []StaticEntry{{MAC: "52:54:00:00:00:09", Port: 2}},
	}}})
	sw := f.Switches()[0]
	a, b, c := connect(t, sw, 1, 1), connect(t, sw, 2, 2), connect(t, sw, 3, 3)
	fr := ethFrame(macN(9), a.mac, -1, 0, 60, 1)
	a.send(fr)
	b.expectFrame(fr)
	c.expectNothing(50 * time.Millisecond)
	// Learning does not move a static entry.
	c.send(ethFrame(bcast, macN(9), -1, 0, 60, 2))
	a.recvData(time.Second)
	b.recvData(time.Second)
	a.send(fr)
	b.expectFrame(fr)
	st := sw.Status()
	found := false
	for _, e := range st.FDB {
		if e.Static && e.Port == 2 && e.MAC == "52:54:00:00:00:09" {
			found = true
		}
	}
	if !found {
		t.Errorf("static entry missing: %+v", st.FDB)
	}
}
