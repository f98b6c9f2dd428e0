package verify

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readIB(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ib", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The testdata/ib outputs are infiniband-diags' and iputils' on a HiNIC
// InfiniBand subnet brought up by OpenSM.
func TestParseIBStat(t *testing.T) {
	p, err := ParseIBStat(readIB(t, "ibstat.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := IBPort{CA: "ibp0s4", NodeGUID: "0x02484efffe001020", State: "Active", PhysState: "LinkUp", LID: 3, SMLID: 1,
		PortGUID: "0x02484efffe001020", LinkLayer: "InfiniBand"}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	if _, err := ParseIBStat("ibstat: no CAs\n"); err == nil {
		t.Error("no CA: no error")
	}
	if _, err := ParseIBStat("CA 'x'\n\tNode GUID: 0x1\n"); err == nil {
		t.Error("no port: no error")
	}
}

func TestParseIBNetDiscover(t *testing.T) {
	nodes := ParseIBNetDiscover(readIB(t, "ibnetdiscover.txt"))
	if len(nodes) != 3 {
		t.Fatalf("%d nodes: %+v", len(nodes), nodes)
	}
	sw := nodes[0]
	if sw.Type != "Switch" || sw.GUID != "026adf195d0a1400" || sw.Desc != "HiSwitch sw0" || sw.Ports != 2 || len(sw.Links) != 2 ||
		sw.Links[1] != "[2] -> H-02484efffe001020[1]" {
		t.Errorf("switch %+v", sw)
	}
	ca := nodes[2]
	if ca.Type != "Ca" || ca.GUID != "02484efffe001010" || ca.Desc != "vm1/hicain0" || len(ca.Links) != 1 ||
		ca.Links[0] != "[1] -> S-026adf195d0a1400[1]" {
		t.Errorf("CA %+v", ca)
	}
}

func TestParseDotted(t *testing.T) {
	pq := ParseDotted(readIB(t, "perfquery.txt"))
	if pq["PortXmitPkts"] != "14077" || pq["PortRcvData"] != "1828808" || pq["CounterSelect"] != "0x0000" {
		t.Errorf("perfquery %v", pq)
	}
	ni := ParseDotted(readIB(t, "smpquery-nodeinfo.txt"))
	if ni["NodeType"] != "Channel Adapter" || ni["Guid"] != "0x02484efffe001020" || ni["NumPorts"] != "1" {
		t.Errorf("smpquery nodeinfo %v", ni)
	}
}

func TestParsePing(t *testing.T) {
	for name, want := range map[string]Ping{
		"ibping.txt": {Sent: 5, Received: 5, AvgMs: 1.616, MaxMs: 2.766, MedianMs: 1.224},
		"ping.txt":   {Sent: 2, Received: 2, AvgMs: 5.313, MaxMs: 6.110, MedianMs: 5.315},
	} {
		p, err := ParsePing(readIB(t, name))
		if math.Abs(p.MedianMs-want.MedianMs) < 1e-9 {
			p.MedianMs = want.MedianMs
		}
		if err != nil || p != want {
			t.Errorf("%s: %+v, %v; want %+v", name, p, err, want)
		}
	}
	// busybox: "packets received", "round-trip".
	p, err := ParsePing("3 packets transmitted, 0 packets received, 100% packet loss\n")
	if err != nil || p.Sent != 3 || p.Received != 0 {
		t.Errorf("busybox, all lost: %+v, %v", p, err)
	}
	if _, err := ParsePing("connect: Network is unreachable\n"); err == nil {
		t.Error("no summary: no error")
	}
}

func TestSMInfoLine(t *testing.T) {
	m := sminfoLine.FindStringSubmatch("sminfo: sm lid 1 sm guid 0x2484efffe001010, activity count 1731 priority 0 state 3 SMINFO_MASTER\n")
	if m == nil || m[1] != "1" || m[2] != "0x2484efffe001010" || m[6] != "SMINFO_MASTER" {
		t.Errorf("got %q", m)
	}
}

func TestParseDevinfoIB(t *testing.T) {
	ports := ParseDevinfo(`hca_id:	ibp0s4
	transport:			InfiniBand (0)
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			active_mtu:		4096 (5)
			sm_lid:			1
			port_lid:		3
			port_lmc:		0x00
			link_layer:		InfiniBand
`)
	if len(ports) != 1 || ports[0].State != "PORT_ACTIVE" || ports[0].Link != "InfiniBand" || ports[0].LID != 3 || ports[0].SMLID != 1 {
		t.Errorf("got %+v", ports)
	}
}
