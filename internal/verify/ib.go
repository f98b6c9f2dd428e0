package verify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Link layers of Host.Link.
const (
	LinkEth = "eth"
	LinkIB  = "ib"
)

// ibCases are the management cases of the gate between two InfiniBand
// hosts, run with infiniband-diags and iputils against the subnet the
// subnet manager (OpenSM) brought up: the ports as ibstat shows them, the
// master SM (sminfo), the topology (ibnetdiscover), SMPs to the server's
// port and to the first switch (smpquery), the server's PMA counters
// before and after traffic (perfquery), vendor MADs to the server's port
// (ibping), and IP over InfiniBand (ping over IPoIB, which also carries
// the tools' out-of-band exchange and the RDMA CM's addressing).
func (g *sshGate) ibCases(o SSHOptions) []Case {
	n := max(o.CMIters/10, 5)
	return []Case{
		{Name: "ibstat", Run: g.ibstat},
		{Name: "sminfo", Run: g.sminfo},
		{Name: "ibnetdiscover", Run: g.ibnetdiscover},
		{Name: "smpquery", Run: g.smpquery},
		{Name: "perfquery", Run: g.perfquery(n)},
		{Name: "ibping", Run: g.ibping(n)},
		{Name: "ipoib_ping", Run: g.ipoibPing(n)},
	}
}

// IBPort is an InfiniBand port as ibstat shows it.
type IBPort struct {
	CA        string
	NodeGUID  string // 0x02484efffe001020
	State     string // Active, Initializing, Down
	PhysState string // LinkUp, Polling
	LID       int
	SMLID     int
	PortGUID  string
	LinkLayer string // InfiniBand, Ethernet
}

var (
	ibstatCA   = regexp.MustCompile(`(?m)^CA '([^']+)'`)
	ibstatNode = regexp.MustCompile(`(?m)^\s*Node GUID:\s*(0x[0-9a-f]+)`)
	ibstatKV   = regexp.MustCompile(`(?m)^\s*(State|Physical state|Base lid|SM lid|Port GUID|Link layer):\s*(\S+)`)
)

// ParseIBStat reads port 1 of the one CA of `ibstat CA`.
func ParseIBStat(out string) (IBPort, error) {
	var p IBPort
	m := ibstatCA.FindStringSubmatch(out)
	if m == nil {
		return p, fmt.Errorf("verify: ibstat printed no CA")
	}
	p.CA = m[1]
	if m := ibstatNode.FindStringSubmatch(out); m != nil {
		p.NodeGUID = m[1]
	}
	for _, m := range ibstatKV.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "State":
			p.State = m[2]
		case "Physical state":
			p.PhysState = m[2]
		case "Base lid":
			p.LID, _ = strconv.Atoi(m[2])
		case "SM lid":
			p.SMLID, _ = strconv.Atoi(m[2])
		case "Port GUID":
			p.PortGUID = m[2]
		case "Link layer":
			p.LinkLayer = m[2]
		}
	}
	if p.State == "" || p.PortGUID == "" {
		return p, fmt.Errorf("verify: ibstat printed no port")
	}
	return p, nil
}

// ibPorts returns both hosts' ports, running ibstat if the ibstat case
// did not.
func (g *sshGate) ibPorts(ctx context.Context) (*IBPort, *IBPort, error) {
	if g.ibSrv == nil || g.ibCli == nil {
		if _, err := g.ibstat(ctx); err != nil {
			return nil, nil, fmt.Errorf("reading the ports with ibstat: %w", err)
		}
	}
	return g.ibSrv, g.ibCli, nil
}

// ibstat checks both ports: Active, LinkUp, InfiniBand, a LID each, and
// the same SM LID. A port may still name an SM that handed over (a new
// master sets every port's SM LID in its next sweep, OpenSM's every
// 10 s): different SM LIDs are read again for up to 30 s.
func (g *sshGate) ibstat(ctx context.Context) (Outcome, error) {
	var o Outcome
	var err error
	for start := time.Now(); ; {
		o, err = g.ibstatOnce(ctx)
		if !errors.Is(err, errSMLIDs) || time.Since(start) > 30*time.Second {
			return o, err
		}
		select {
		case <-ctx.Done():
			return o, err
		case <-time.After(2 * time.Second):
		}
	}
}

var errSMLIDs = errors.New("the ports name different SMs")

func (g *sshGate) ibstatOnce(ctx context.Context) (Outcome, error) {
	var ports [2]*IBPort
	var details []string
	for i, h := range []Host{g.srv, g.cli} {
		out, err := h.Run(ctx, "ibstat "+h.Device())
		g.save("ibstat", h.Name(), out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w: %s", h.Name(), err, lastLine(out))
		}
		p, err := ParseIBStat(out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
		}
		if p.State != "Active" || p.PhysState != "LinkUp" || p.LinkLayer != "InfiniBand" || p.LID == 0 || p.SMLID == 0 {
			return Outcome{}, fmt.Errorf("%s: %s port 1: state %s, physical state %s, link layer %s, LID %d, SM LID %d",
				h.Name(), p.CA, p.State, p.PhysState, p.LinkLayer, p.LID, p.SMLID)
		}
		ports[i] = &p
		details = append(details, fmt.Sprintf("%s: %s Active, LID %d, GUID %s", h.Name(), p.CA, p.LID, p.PortGUID))
	}
	if ports[0].SMLID != ports[1].SMLID {
		return Outcome{}, fmt.Errorf("%w: LID %d and %d", errSMLIDs, ports[0].SMLID, ports[1].SMLID)
	}
	if ports[0].LID == ports[1].LID {
		return Outcome{}, fmt.Errorf("both ports have LID %d", ports[0].LID)
	}
	g.ibSrv, g.ibCli = ports[0], ports[1]
	return Outcome{Detail: strings.Join(details, "; ") + fmt.Sprintf("; SM LID %d", ports[0].SMLID)}, nil
}

var sminfoLine = regexp.MustCompile(`sm lid (\d+) sm guid (0x[0-9a-f]+), activity count (\d+) priority (\d+) state (\d+) (\S+)`)

// sminfo asks the subnet's SM, from the client, for its SMInfo: it must
// be the master the ports name.
func (g *sshGate) sminfo(ctx context.Context) (Outcome, error) {
	srv, _, err := g.ibPorts(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out, err := g.cli.Run(ctx, "sminfo")
	g.save("sminfo", g.cli.Name(), out)
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %s", err, lastLine(out))
	}
	m := sminfoLine.FindStringSubmatch(out)
	if m == nil {
		return Outcome{}, fmt.Errorf("sminfo printed no SMInfo: %s", lastLine(out))
	}
	if lid, _ := strconv.Atoi(m[1]); lid != srv.SMLID || m[6] != "SMINFO_MASTER" {
		return Outcome{}, fmt.Errorf("SM at LID %s is %s, want the master at LID %d", m[1], m[6], srv.SMLID)
	}
	return Outcome{Detail: fmt.Sprintf("master SM at LID %s, GUID %s, priority %s, activity count %s", m[1], m[2], m[4], m[3])}, nil
}

// IBNode is a node of ibnetdiscover's topology.
type IBNode struct {
	Type  string // Switch, Ca
	GUID  string // as ibnetdiscover names it: 02484efffe001020
	Desc  string // "HiSwitch sw0", "vm-a/hicain0"
	Ports int
	// Links are the node's cabled ports: "[1] -> S-026adf195d0a1400[2]".
	Links []string
}

var (
	ndNode = regexp.MustCompile(`^(Switch|Ca)\s+(\d+)\s+"[SH]-([0-9a-f]+)"\s+#\s+"([^"]*)"`)
	ndLink = regexp.MustCompile(`^\[(\d+)\](?:\([0-9a-f]+\))?\s+"([SH]-[0-9a-f]+)"\[(\d+)\]`)
)

// ParseIBNetDiscover reads the nodes of ibnetdiscover's topology file.
func ParseIBNetDiscover(out string) []IBNode {
	var nodes []IBNode
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if m := ndNode.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			nodes = append(nodes, IBNode{Type: m[1], Ports: n, GUID: m[3], Desc: m[4]})
			continue
		}
		if m := ndLink.FindStringSubmatch(l); m != nil && len(nodes) > 0 {
			nd := &nodes[len(nodes)-1]
			nd.Links = append(nd.Links, fmt.Sprintf("[%s] -> %s[%s]", m[1], m[2], m[3]))
		}
	}
	return nodes
}

// ibnetdiscover discovers the subnet from the client: both hosts' CAs
// must be there, cabled to a switch.
func (g *sshGate) ibnetdiscover(ctx context.Context) (Outcome, error) {
	srv, cli, err := g.ibPorts(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out, err := g.cli.Run(ctx, "ibnetdiscover")
	g.save("ibnetdiscover", g.cli.Name(), out)
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %s", err, lastLine(out))
	}
	nodes := ParseIBNetDiscover(out)
	var switches, cas, links int
	for _, n := range nodes {
		if n.Type == "Switch" {
			switches++
		} else {
			cas++
		}
		links += len(n.Links)
	}
	for _, p := range []*IBPort{srv, cli} {
		found := false
		for _, n := range nodes {
			if n.Type == "Ca" && "0x"+n.GUID == p.NodeGUID && len(n.Links) > 0 {
				found = true
			}
		}
		if !found {
			return Outcome{}, fmt.Errorf("no cabled CA with node GUID %s (%s) in the topology", p.NodeGUID, p.CA)
		}
	}
	if switches == 0 {
		return Outcome{}, fmt.Errorf("no switch in the topology")
	}
	// Each cable is listed from both of its ends.
	return Outcome{Figure: float64(switches + cas), Unit: "nodes",
		Detail: fmt.Sprintf("%d switch(es), %d CA(s), %d cable(s)", switches, cas, links/2)}, nil
}

// portCapIsSM is PortInfo CapabilityMask's IsSM bit.
const portCapIsSM = 0x2

var dotted = regexp.MustCompile(`(?m)^(\w+):\.+(.*)$`)

// ParseDotted reads the "Name:....value" lines of smpquery and perfquery.
func ParseDotted(out string) map[string]string {
	kv := map[string]string{}
	for _, m := range dotted.FindAllStringSubmatch(out, -1) {
		kv[m[1]] = strings.TrimSpace(m[2])
	}
	return kv
}

// smpquery sends SMPs from the client: NodeInfo and PortInfo of the
// server's port by LID, and NodeInfo and NodeDescription of the switch
// the client is cabled to, by directed route.
func (g *sshGate) smpquery(ctx context.Context) (Outcome, error) {
	srv, _, err := g.ibPorts(ctx)
	if err != nil {
		return Outcome{}, err
	}
	run := func(what, args string) (map[string]string, string, error) {
		out, err := g.cli.Run(ctx, "smpquery "+args)
		g.save("smpquery_"+what, g.cli.Name(), out)
		if err != nil {
			return nil, out, fmt.Errorf("smpquery %s: %w: %s", args, err, lastLine(out))
		}
		return ParseDotted(out), out, nil
	}
	ni, _, err := run("nodeinfo", fmt.Sprintf("nodeinfo %d", srv.LID))
	if err != nil {
		return Outcome{}, err
	}
	if ni["NodeType"] != "Channel Adapter" || !strings.EqualFold(ni["Guid"], srv.NodeGUID) {
		return Outcome{}, fmt.Errorf("NodeInfo of LID %d: type %q, GUID %q, want a Channel Adapter with GUID %s",
			srv.LID, ni["NodeType"], ni["Guid"], srv.NodeGUID)
	}
	pi, _, err := run("portinfo", fmt.Sprintf("portinfo %d 1", srv.LID))
	if err != nil {
		return Outcome{}, err
	}
	if pi["Lid"] != strconv.Itoa(srv.LID) || pi["SMLid"] != strconv.Itoa(srv.SMLID) || pi["LinkState"] != "Active" {
		return Outcome{}, fmt.Errorf("PortInfo of LID %d: Lid %q, SMLid %q, LinkState %q", srv.LID, pi["Lid"], pi["SMLid"], pi["LinkState"])
	}
	// The master SM's own port says IsSM (its host claimed it).
	caps, err := strconv.ParseUint(strings.TrimPrefix(pi["CapMask"], "0x"), 16, 32)
	if err != nil {
		return Outcome{}, fmt.Errorf("PortInfo of LID %d: CapMask %q", srv.LID, pi["CapMask"])
	}
	if srv.SMLID == srv.LID && caps&portCapIsSM == 0 {
		return Outcome{}, fmt.Errorf("PortInfo of LID %d, the master SM's port: CapMask %#x lacks IsSM", srv.LID, caps)
	}
	sw, _, err := run("switch_nodeinfo", "-D nodeinfo 0,1")
	if err != nil {
		return Outcome{}, err
	}
	if sw["NodeType"] != "Switch" {
		return Outcome{}, fmt.Errorf("NodeInfo by directed route 0,1: type %q, want Switch", sw["NodeType"])
	}
	out, err := g.cli.Run(ctx, "smpquery -D nodedesc 0,1")
	g.save("smpquery_switch_nodedesc", g.cli.Name(), out)
	if err != nil {
		return Outcome{}, fmt.Errorf("smpquery -D nodedesc 0,1: %w: %s", err, lastLine(out))
	}
	desc := strings.TrimSpace(out[strings.LastIndex(out, ".")+1:])
	return Outcome{Detail: fmt.Sprintf("LID %d: CA %s, port Active, MTU %s, CapMask %#x; first hop: switch %s %q, %s ports",
		srv.LID, ni["Guid"], pi["NeighborMTU"], caps, sw["Guid"], desc, sw["NumPorts"])}, nil
}

// perfquery reads the server port's PortCounters from the client, sends
// n pings over IPoIB, and reads them again: both packet counters must
// have grown by at least n.
func (g *sshGate) perfquery(n int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		srv, _, err := g.ibPorts(ctx)
		if err != nil {
			return Outcome{}, err
		}
		read := func(when string) (map[string]string, error) {
			out, err := g.cli.Run(ctx, fmt.Sprintf("perfquery %d 1", srv.LID))
			g.save("perfquery_"+when, g.cli.Name(), out)
			if err != nil {
				return nil, fmt.Errorf("perfquery %d 1: %w: %s", srv.LID, err, lastLine(out))
			}
			kv := ParseDotted(out)
			for _, k := range []string{"PortXmitPkts", "PortRcvPkts", "PortXmitData", "PortRcvData"} {
				if _, err := strconv.ParseUint(kv[k], 10, 64); err != nil {
					return nil, fmt.Errorf("perfquery printed no %s", k)
				}
			}
			return kv, nil
		}
		before, err := read("before")
		if err != nil {
			return Outcome{}, err
		}
		if out, err := g.cli.Run(ctx, fmt.Sprintf("ping -q -c %d -i 0.2 -W 5 %s", n, g.srv.DataIP())); err != nil {
			return Outcome{}, fmt.Errorf("ping over IPoIB: %w: %s", err, lastLine(out))
		}
		after, err := read("after")
		if err != nil {
			return Outcome{}, err
		}
		delta := func(k string) uint64 {
			a, _ := strconv.ParseUint(after[k], 10, 64)
			b, _ := strconv.ParseUint(before[k], 10, 64)
			if a < b {
				return 0
			}
			return a - b
		}
		tx, rx := delta("PortXmitPkts"), delta("PortRcvPkts")
		if tx < uint64(n) || rx < uint64(n) {
			return Outcome{}, fmt.Errorf("%d pings: the server's port counted %d packets out and %d in", n, tx, rx)
		}
		return Outcome{Detail: fmt.Sprintf("LID %d port 1 over %d pings: +%d packets out (+%d dwords), +%d in (+%d dwords); now %s out, %s in",
			srv.LID, n, tx, delta("PortXmitData"), rx, delta("PortRcvData"), after["PortXmitPkts"], after["PortRcvPkts"])}, nil
	}
}

// Ping is the summary of ping (iputils) or ibping.
type Ping struct {
	Sent, Received int
	AvgMs, MaxMs   float64
	// MedianMs is the median of the replies' round trips: on a TCG guest
	// one reply now and then takes a scheduling delay of a second, which
	// moves the average ten-fold.
	MedianMs float64
}

var (
	pingCount = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)
	pingRTT   = regexp.MustCompile(`(?m)^(?:rtt|round-trip) min/avg/max(?:/mdev)? = [0-9.]+/([0-9.]+)/([0-9.]+)`)
	pingReply = regexp.MustCompile(`(?m)^(?:Pong from|\d+ bytes from).* time[= ]([0-9.]+) ms`)
)

// ParsePing reads the summary of ping or ibping.
func ParsePing(out string) (Ping, error) {
	var p Ping
	m := pingCount.FindStringSubmatch(out)
	if m == nil {
		return p, fmt.Errorf("verify: no ping summary")
	}
	p.Sent, _ = strconv.Atoi(m[1])
	p.Received, _ = strconv.Atoi(m[2])
	if m := pingRTT.FindStringSubmatch(out); m != nil {
		p.AvgMs, _ = strconv.ParseFloat(m[1], 64)
		p.MaxMs, _ = strconv.ParseFloat(m[2], 64)
	}
	var rtts []float64
	for _, m := range pingReply.FindAllStringSubmatch(out, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			rtts = append(rtts, v)
		}
	}
	p.MedianMs = median(rtts)
	return p, nil
}

// ibping pings the server's port from the client with vendor-class
// MADs (QP1 to QP1) that the server's `ibping -S` answers.
func (g *sshGate) ibping(n int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		srv, _, err := g.ibPorts(ctx)
		if err != nil {
			return Outcome{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
		defer cancel()
		srvDone := make(chan string, 1)
		go func() {
			out, _ := g.srv.Run(ctx, fmt.Sprintf("timeout -s KILL %d ibping -S", int(g.o.Timeout.Seconds())))
			srvDone <- out
		}()
		// The server's agent registers after a moment: single pings
		// until one is answered, then the n that count.
		out, err := g.cli.Run(ctx, fmt.Sprintf(`i=0; until ibping -c 1 -L %d >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -ge 30 ] && break; sleep 0.5; done; ibping -c %d -L %d`, srv.LID, n, srv.LID))
		g.save("ibping", "client", out)
		_, _ = g.srv.Run(context.WithoutCancel(ctx), "pkill -x ibping; true")
		select {
		case o := <-srvDone:
			g.save("ibping", "server", o)
		case <-time.After(10 * time.Second):
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("ibping -c %d -L %d: %w: %s", n, srv.LID, err, lastLine(out))
		}
		p, err := ParsePing(out)
		if err != nil {
			return Outcome{}, err
		}
		if p.Received != n {
			return Outcome{}, fmt.Errorf("ibping: %d of %d answered", p.Received, n)
		}
		return Outcome{Figure: p.MedianMs, Unit: "ms", Detail: fmt.Sprintf("%d/%d vendor MADs to LID %d answered; median RTT %.3f ms, average %.3f, max %.3f",
			p.Received, p.Sent, srv.LID, p.MedianMs, p.AvgMs, p.MaxMs)}, nil
	}
}

// ipoibPing pings the server's IPoIB address from the client.
func (g *sshGate) ipoibPing(n int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		out, err := g.cli.Run(ctx, fmt.Sprintf("ping -c %d -i 0.2 -W 5 %s", n, g.srv.DataIP()))
		g.save("ipoib_ping", "client", out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: %s", err, lastLine(out))
		}
		p, err := ParsePing(out)
		if err != nil {
			return Outcome{}, err
		}
		if p.Received != n {
			return Outcome{}, fmt.Errorf("%d of %d pings answered", p.Received, n)
		}
		return Outcome{Figure: p.MedianMs, Unit: "ms", Detail: fmt.Sprintf("%d/%d ICMP echo over IPoIB to %s; median RTT %.3f ms, average %.3f, max %.3f",
			p.Received, p.Sent, g.srv.DataIP(), p.MedianMs, p.AvgMs, p.MaxMs)}, nil
	}
}
