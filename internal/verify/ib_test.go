package verify

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// ibHost is an InfiniBand Host whose commands answer from the outputs
// in testdata/ib (vm-b's port, LID 3, SM LID 1) and record what ran.
type ibHost struct {
	name   string
	mu     sync.Mutex
	cmds   []string
	ibstat []string // successive outputs of ibstat
}

func (h *ibHost) Name() string   { return h.name }
func (h *ibHost) DataIP() string { return "10.44.0.1" }
func (h *ibHost) Device() string { return "ibp0s4" }
func (h *ibHost) NIC() string    { return "hicain" }
func (h *ibHost) Link() string   { return LinkIB }

func (h *ibHost) Run(_ context.Context, cmd string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, cmd)
	switch {
	case strings.HasPrefix(cmd, "ibstat"):
		out := h.ibstat[0]
		if len(h.ibstat) > 1 {
			h.ibstat = h.ibstat[1:]
		}
		return out, nil
	case strings.HasPrefix(cmd, "ss -Hltn"):
		return cmd, nil
	case strings.Contains(cmd, "ibv_rc_pingpong") && strings.Contains(cmd, "10.44.0.1"):
		return "8192000 bytes in 0.93 seconds = 70.46 Mbit/sec\n1000 iters in 0.93 seconds = 930.12 usec/iter\n", nil
	}
	return "", nil
}

// TestSSHGateInfiniBand: between two InfiniBand hosts the gate runs the
// management cases after ibv_devinfo, the tools get no GID index, and
// ibstat waits out a port that still names the SM before a handover.
func TestSSHGateInfiniBand(t *testing.T) {
	port := func(lid, sm int) string {
		s := readIB(t, "ibstat.txt")
		s = strings.Replace(s, "Base lid: 3", fmt.Sprintf("Base lid: %d", lid), 1)
		return strings.Replace(s, "SM lid: 1", fmt.Sprintf("SM lid: %d", sm), 1)
	}
	srv := &ibHost{name: "vm-a", ibstat: []string{port(1, 1)}}
	cli := &ibHost{name: "vm-b", ibstat: []string{port(3, 4), port(3, 1)}}
	o := DefaultSSHOptions()
	cases := SSHCases(srv, cli, o)
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	want := "ibv_devices ibv_devinfo ibstat sminfo ibnetdiscover smpquery perfquery ibping ipoib_ping ibv_rc_pingpong"
	if got := strings.Join(names, " "); !strings.HasPrefix(got, want) || len(cases) != 44 || names[28] != "pyverbs" || names[len(names)-1] != "mpi_allreduce" {
		t.Fatalf("%d cases: %s", len(cases), got)
	}
	g := &sshGate{srv: srv, cli: cli, o: o, ib: true, port: o.BasePort, gidSrv: -1, gidCli: -1, gid6Srv: -1, gid6Cli: -1}
	out, err := g.ibstat(context.Background())
	if err != nil || !strings.Contains(out.Detail, "SM LID 1") || len(cli.ibstat) != 1 {
		t.Fatalf("ibstat: %+v, %v (client reads left %d)", out, err, len(cli.ibstat))
	}
	if g.ibSrv.LID != 1 || g.ibCli.LID != 3 || g.ibSrv.NodeGUID != "0x02484efffe001020" {
		t.Errorf("ports %+v %+v", g.ibSrv, g.ibCli)
	}
	pp, err := g.pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", "-n 1000")(context.Background())
	if err != nil || pp.Figure != 930.12 {
		t.Fatalf("pingpong: %+v, %v", pp, err)
	}
	// The completion-channel variant runs the same tool with -e on both
	// sides.
	if pp, err := g.pingpong("ibv_rc_pingpong_events", "ibv_rc_pingpong", "-e -n 1000")(context.Background()); err != nil || pp.Figure != 930.12 {
		t.Fatalf("pingpong -e: %+v, %v", pp, err)
	}
	for _, h := range []*ibHost{srv, cli} {
		n := 0
		for _, c := range h.cmds {
			if strings.Contains(c, "ibv_rc_pingpong") && strings.Contains(c, " -e -n 1000") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s ran ibv_rc_pingpong -e %d times, want 1: %q", h.name, n, h.cmds)
		}
	}
	for _, h := range []*ibHost{srv, cli} {
		for _, c := range h.cmds {
			if strings.Contains(c, "ibv_rc_pingpong") && strings.Contains(c, " -g ") {
				t.Errorf("%s ran %q: a GID index on InfiniBand", h.name, c)
			}
		}
	}
}
