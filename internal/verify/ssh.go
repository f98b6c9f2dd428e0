package verify

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Host is one guest of a deployed rack as the SSH gate sees it: a shell
// reached over SSH, with an RDMA device on its data network. The CLI adapts
// deploy's SSH client to it; verify does not import deploy.
type Host interface {
	Name() string
	DataIP() string
	Device() string // e.g. rxe0
	NIC() string    // the NIC kind: rxe, hicain
	// Link is the link layer of the NIC: "eth" (RoCEv2) or "ib" (native
	// InfiniBand: peers addressed by LID, DataIP on IPoIB).
	Link() string
	// Run runs cmd in a shell and returns its output (stdout and stderr).
	// A non-zero exit is an error; the output is returned with it.
	Run(ctx context.Context, cmd string) (string, error)
}

// SSHOptions size the SSH gate. The defaults suit TCG guests, where a
// round trip takes milliseconds and bandwidth is a few MiB/s.
type SSHOptions struct {
	PingPongIters int
	BWIters       int
	BWSize        int
	LatIters      int
	// Timeout bounds each tool run (server and client).
	Timeout time.Duration
	// Save, if set, is a directory that receives every tool's raw output
	// as CASE.server.txt and CASE.client.txt.
	Save string
	// IntegrityBytes is how much the data-integrity case writes and reads.
	IntegrityBytes int
	// CMIters is the number of pings of rping and of messages of
	// ucmatose and udaddy, the RDMA CM cases.
	CMIters int
	// MPIIters is the round trips per size of the MPI ping-pong (the
	// allreduce runs a fifth of it, plus one), MPIMaxBytes its largest
	// message (the allreduce's largest vector is a quarter of it).
	MPIIters    int
	MPIMaxBytes int
	// BasePort is the first TCP port of the tools' out-of-band exchange;
	// each case uses its own so a lingering server cannot confuse the next.
	BasePort int
	// ActiveMTU is the active MTU (bytes) each host must show in the
	// ibv_devinfo case, by Host.Name(): what the rack's netdev MTU
	// gives. A host without an entry (or 0) is not checked; its active
	// MTU is reported either way.
	ActiveMTU map[string]int
	// GPUs are the server host's GPUs as the rack spec gives them;
	// with none, the GPU cases (hicart_smi, hicart_test,
	// hicart_bandwidth) and the HiLink cases are not listed.
	GPUs []GPU
	// ClientGPUs are the client host's: those on the server's HiLink
	// switch take part in the HiLink cases.
	ClientGPUs []GPU
	// LinkCeiling measures the raw HiLink ceiling on the host, once per
	// HiLink case that reports a rate (hilink.MeasureCeiling).
	LinkCeiling func(ctx context.Context) (LinkCeiling, error)
	// LinkPorts, if set, reads the ports of the rack's HiLink switches
	// that have a GPU, for hicart_smi_topo's host-side check.
	LinkPorts func(ctx context.Context) ([]LinkPort, error)
	// P2PSize and P2PIters size hicart_p2p, AllreduceMax is
	// hicart_allreduce's largest size (defaults DefaultP2PSize,
	// DefaultP2PIters, DefaultAllreduceMax).
	P2PSize, P2PIters int
	AllreduceMax      int
}

// DefaultSSHOptions are TCG-sized.
func DefaultSSHOptions() SSHOptions {
	return SSHOptions{PingPongIters: 500, BWIters: 500, BWSize: 65536, LatIters: 500, IntegrityBytes: 8 << 20,
		CMIters: 100, MPIIters: 50, MPIMaxBytes: 1 << 20, Timeout: 180 * time.Second, BasePort: 18515}
}

// sshGate holds what the cases share.
type sshGate struct {
	srv, cli Host
	o        SSHOptions
	gidSrv   int
	gidCli   int
	// The RoCEv2 link-local (IPv6) GIDs: perftest's multicast test needs
	// both sides' GIDs of one IP version, and its MGID is IPv6.
	gid6Srv, gid6Cli int
	port             int
	// ib is set when both hosts' ports are InfiniBand: the tools address
	// the peer by LID (no -g or -x), and the diag cases run.
	ib bool
	// The InfiniBand ports as ibstat shows them, once the ibstat case
	// (or a case that needs them) has run.
	ibSrv, ibCli *IBPort
	// The MPI cases: programs built, the ping-pong's one run.
	mpiBuilt  bool
	mpiPPDone bool
	mpiPP     MPIPingPong
	mpiPPErr  error
}

// SSHCases returns the 20 cases of the gate between server and client:
// ibv_devices, ibv_devinfo, the rc/ud/srq pingpongs, the eight perftest
// bandwidth and latency tests, UD multicast and a data-integrity check,
// then the RDMA CM cases: rping, ucmatose, udaddy and ib_send_bw -R, which
// find each other by IP address through librdmacm (CM MADs on QP1) instead
// of a TCP exchange, and last rdma-core's own pyverbs suite on the
// server's device, and, when the rack spec gives the server GPUs, the
// HiGPU cases of gpuCases and the HiLink cases of linkCases. The GID
// indexes are chosen by the ibv_devinfo case; the server side of each
// tool starts first. Between two InfiniBand
// hosts the tools address each other by LID, their out-of-band TCP and
// the RDMA CM run over IPoIB, and the management cases of ibCases follow
// ibv_devinfo.
func SSHCases(server, client Host, o SSHOptions) []Case {
	g := &sshGate{srv: server, cli: client, o: o, gidSrv: -1, gidCli: -1, gid6Srv: -1, gid6Cli: -1, port: o.BasePort,
		ib: server.Link() == LinkIB && client.Link() == LinkIB}
	if g.o.Timeout == 0 {
		g.o.Timeout = DefaultSSHOptions().Timeout
	}
	if g.port == 0 {
		g.port = 18515
	}
	if g.o.IntegrityBytes == 0 {
		g.o.IntegrityBytes = DefaultSSHOptions().IntegrityBytes
	}
	if o.CMIters == 0 {
		o.CMIters = DefaultSSHOptions().CMIters
	}
	if g.o.MPIIters == 0 {
		g.o.MPIIters = DefaultSSHOptions().MPIIters
	}
	if g.o.MPIMaxBytes == 0 {
		g.o.MPIMaxBytes = DefaultSSHOptions().MPIMaxBytes
	}
	if g.o.P2PSize == 0 {
		g.o.P2PSize = DefaultP2PSize
	}
	if g.o.P2PIters == 0 {
		g.o.P2PIters = DefaultP2PIters
	}
	if g.o.AllreduceMax == 0 {
		g.o.AllreduceMax = DefaultAllreduceMax
	}
	pp := fmt.Sprint(o.PingPongIters)
	bw := fmt.Sprintf("-n %d -s %d", o.BWIters, o.BWSize)
	lat := fmt.Sprintf("-n %d", o.LatIters)
	atomicBW := fmt.Sprintf("-n %d", o.BWIters)
	var ib []Case
	if g.ib {
		ib = g.ibCases(o)
	}
	return append(append(append([]Case{
		{Name: "ibv_devices", Run: g.devices},
		{Name: "ibv_devinfo", Run: g.devinfo},
	}, ib...), []Case{
		{Name: "ibv_rc_pingpong", Run: g.pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", "-n "+pp)},
		// -e: each side sleeps on its completion channel (req_notify_cq,
		// the CQ event, ack) instead of polling.
		{Name: "ibv_rc_pingpong_events", Run: g.pingpong("ibv_rc_pingpong_events", "ibv_rc_pingpong", "-e -n "+pp)},
		{Name: "ibv_ud_pingpong", Run: g.pingpong("ibv_ud_pingpong", "ibv_ud_pingpong", "-s 1024 -n "+pp)},
		{Name: "ibv_srq_pingpong", Run: g.pingpong("ibv_srq_pingpong", "ibv_srq_pingpong", "-n "+pp)},
		{Name: "ib_send_bw", Run: g.perf("ib_send_bw", bw, false)},
		{Name: "ib_write_bw", Run: g.perf("ib_write_bw", bw, false)},
		{Name: "ib_read_bw", Run: g.perf("ib_read_bw", bw, false)},
		{Name: "ib_atomic_bw", Run: g.perf("ib_atomic_bw", atomicBW, false)},
		{Name: "ib_send_lat", Run: g.perf("ib_send_lat", lat, true)},
		{Name: "ib_write_lat", Run: g.perf("ib_write_lat", lat, true)},
		{Name: "ib_read_lat", Run: g.perf("ib_read_lat", lat, true)},
		{Name: "ib_atomic_lat", Run: g.perf("ib_atomic_lat", lat, true)},
		{Name: "ud_multicast", Run: g.multicast(fmt.Sprintf("-n %d -s 1024", o.BWIters))},
		{Name: "data_integrity", Run: g.integrity(g.o.IntegrityBytes)},
		{Name: "rping", Run: g.rping(o.CMIters)},
		{Name: "ucmatose", Run: g.cmatose("ucmatose", o.CMIters)},
		{Name: "udaddy", Run: g.cmatose("udaddy", o.CMIters)},
		{Name: "cmtime", Run: g.cmtime(CMTimeRuns)},
		{Name: "ib_send_bw_rdma_cm", Run: g.perfCM("ib_send_bw", bw)},
		{Name: "pyverbs", Run: g.pyverbs},
	}...), append(append(g.consumerCases(), g.gpuCases()...), g.linkCases()...)...)
}

func (g *sshGate) save(name, side, out string) {
	if g.o.Save == "" {
		return
	}
	_ = os.MkdirAll(g.o.Save, 0o755)
	_ = os.WriteFile(filepath.Join(g.o.Save, name+"."+side+".txt"), []byte(out), 0o644)
}

func (g *sshGate) devices(ctx context.Context) (Outcome, error) {
	var details []string
	for _, h := range []Host{g.srv, g.cli} {
		out, err := h.Run(ctx, "ibv_devices")
		g.save("ibv_devices", h.Name(), out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
		}
		devs := ParseDevices(out)
		found := false
		for _, d := range devs {
			found = found || d == h.Device()
		}
		if !found {
			return Outcome{}, fmt.Errorf("%s: %s not listed by ibv_devices (got %v)", h.Name(), h.Device(), devs)
		}
		details = append(details, h.Name()+": "+strings.Join(devs, ","))
	}
	return Outcome{Detail: strings.Join(details, "; ")}, nil
}

func (g *sshGate) devinfo(ctx context.Context) (Outcome, error) {
	var details []string
	for i, h := range []Host{g.srv, g.cli} {
		out, err := h.Run(ctx, "ibv_devinfo -v -d "+h.Device())
		g.save("ibv_devinfo", h.Name(), out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
		}
		ports := ParseDevinfo(out)
		if len(ports) == 0 {
			return Outcome{}, fmt.Errorf("%s: ibv_devinfo listed no port", h.Name())
		}
		p := ports[0]
		if p.State != "PORT_ACTIVE" {
			return Outcome{}, fmt.Errorf("%s: port %d is %s, want PORT_ACTIVE", h.Name(), p.Num, p.State)
		}
		if want := g.o.ActiveMTU[h.Name()]; want != 0 && p.ActiveMTU != want {
			return Outcome{}, fmt.Errorf("%s: port %d: active MTU %d, want %d (from the rack's mtu; max MTU %d)",
				h.Name(), p.Num, p.ActiveMTU, want, p.MaxMTU)
		}
		if g.ib {
			if p.Link != "InfiniBand" || p.LID == 0 || p.SMLID == 0 {
				return Outcome{}, fmt.Errorf("%s: port %d: link layer %s, LID %d, SM LID %d: want InfiniBand with LIDs from a subnet manager",
					h.Name(), p.Num, p.Link, p.LID, p.SMLID)
			}
			details = append(details, fmt.Sprintf("%s: %s port %d ACTIVE InfiniBand, LID %d, SM LID %d, active MTU %d",
				h.Name(), h.Device(), p.Num, p.LID, p.SMLID, p.ActiveMTU))
			continue
		}
		gid, err := RoCEv2GID(p.GIDs, h.DataIP())
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
		}
		gid6 := RoCEv2LinkLocalGID(p.GIDs)
		if i == 0 {
			g.gidSrv, g.gid6Srv = gid, gid6
		} else {
			g.gidCli, g.gid6Cli = gid, gid6
		}
		details = append(details, fmt.Sprintf("%s: %s port %d ACTIVE %s, active MTU %d, RoCEv2 GID[%d] ::ffff:%s",
			h.Name(), h.Device(), p.Num, p.Link, p.ActiveMTU, gid, h.DataIP()))
	}
	return Outcome{Detail: strings.Join(details, "; ")}, nil
}

// gids returns the GID indexes chosen by devinfo, or finds them now if
// that case did not run (or failed).
func (g *sshGate) gids(ctx context.Context) (int, int, error) {
	if g.ib {
		return -1, -1, nil
	}
	if g.gidSrv < 0 || g.gidCli < 0 {
		if _, err := g.devinfo(ctx); err != nil {
			return -1, -1, fmt.Errorf("choosing the RoCEv2 GID: %w", err)
		}
	}
	return g.gidSrv, g.gidCli, nil
}

// pair runs the server command on srv, waits until its TCP port listens,
// then runs the client command on cli, and returns both outputs. Each
// command runs under the guest's `timeout`, so nothing outlives the case.
func (g *sshGate) pair(ctx context.Context, name, srvCmd, cliCmd string) (string, string, error) {
	return g.pairOn(ctx, name, srvCmd, cliCmd, tcpListening)
}

// listening reports whether the server side of a tool listens on port,
// from the output of its check command.
type listening struct {
	cmd    func(port int) string // run on the server
	listen func(out string, port int) bool
	// fixed is the port of a tool that cannot be given one (udaddy
	// listens on 7174); 0 gives each run a port of its own.
	fixed int
}

// tcpListening: the tools that exchange QP numbers over TCP (iproute2's
// ss).
var tcpListening = listening{cmd: func(port int) string { return fmt.Sprintf("ss -Hltn 'sport = :%d'", port) }, listen: func(out string, port int) bool {
	return strings.Contains(out, fmt.Sprint(port))
}}

// cmListening: the tools that connect with librdmacm listen on an RDMA CM
// ID, not a socket; iproute2's rdma tool lists it in state LISTEN with its
// address and port.
var cmListening = listening{cmd: func(int) string { return "rdma res show cm_id" }, listen: func(out string, port int) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "LISTEN") && strings.Contains(l+" ", fmt.Sprintf(":%d ", port)) {
			return true
		}
	}
	return false
}}

func (g *sshGate) pairOn(ctx context.Context, name, srvCmd, cliCmd string, ready listening) (string, string, error) {
	g.port++
	port := g.port
	secs := int(g.o.Timeout.Seconds())
	if ready.fixed != 0 {
		port = ready.fixed
	}
	wrap := func(cmd string) string {
		if strings.Contains(cmd, "{port}") || ready.fixed != 0 {
			return fmt.Sprintf("timeout -s KILL %d %s", secs, strings.ReplaceAll(cmd, "{port}", fmt.Sprint(port)))
		}
		return fmt.Sprintf("timeout -s KILL %d %s -p %d", secs, cmd, port)
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout+15*time.Second)
	defer cancel()
	srvDone := make(chan runResult, 1)
	go func() {
		out, err := g.srv.Run(ctx, wrap(srvCmd))
		srvDone <- runResult{out, err}
	}()
	if exited, err := g.awaitListening(ctx, port, ready, srvDone); err != nil {
		if exited == nil && ctx.Err() == nil {
			cancel()
			r := <-srvDone
			exited = &r
		}
		if exited != nil {
			g.save(name, "server", exited.out)
			return exited.out, "", err
		}
		return "", "", err
	}
	cliOut, cliErr := g.cli.Run(ctx, wrap(cliCmd))
	g.save(name, "client", cliOut)
	var r runResult
	if cliErr != nil {
		// The server may wait forever for a client that gave up.
		select {
		case r = <-srvDone:
		case <-time.After(5 * time.Second):
			cancel()
			r = <-srvDone
		}
	} else {
		r = <-srvDone
	}
	g.save(name, "server", r.out)
	if cliErr != nil {
		return r.out, cliOut, &pairError{side: "client", err: cliErr, last: lastLine(cliOut), srvErr: r.err}
	}
	if r.err != nil {
		return r.out, cliOut, &pairError{side: "server", err: r.err, last: lastLine(r.out)}
	}
	return r.out, cliOut, nil
}

// runResult is a command's output and error, from a goroutine.
type runResult struct {
	out string
	err error
}

// awaitListening polls the server until ready says it listens on port
// (nil, nil), for at most 20 s. A server that exited first (srvDone)
// is returned with the error; a timeout or a done ctx returns only the
// error.
func (g *sshGate) awaitListening(ctx context.Context, port int, ready listening, srvDone <-chan runResult) (*runResult, error) {
	for range 100 {
		out, _ := g.srv.Run(ctx, ready.cmd(port))
		if ready.listen(out, port) {
			return nil, nil
		}
		select {
		case r := <-srvDone:
			return &r, fmt.Errorf("server exited before listening: %v: %s", r.err, lastLine(r.out))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("server did not listen on port %d in 20 s", port)
}

// pairError is a pair run whose client or server failed: side, its
// error and the last line it printed. A failed client's server may have
// failed as well (srvErr).
type pairError struct {
	side   string
	err    error
	last   string
	srvErr error
}

func (e *pairError) Error() string { return fmt.Sprintf("%s: %v: %s", e.side, e.err, e.last) }
func (e *pairError) Unwrap() error { return e.err }

// gidFlag is a tool's GID index option, or nothing for -1 (InfiniBand:
// the tools then address the peer by LID).
func gidFlag(flag string, idx int) string {
	if idx < 0 {
		return ""
	}
	return fmt.Sprintf(" %s %d", flag, idx)
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l[len(l)-1])
}

// pingpong runs one of libibverbs' pingpong examples, tool, with args
// as case name.
func (g *sshGate) pingpong(name, tool, args string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		gs, gc, err := g.gids(ctx)
		if err != nil {
			return Outcome{}, err
		}
		srvOut, cliOut, err := g.pair(ctx, name,
			fmt.Sprintf("%s -d %s%s %s", tool, g.srv.Device(), gidFlag("-g", gs), args),
			fmt.Sprintf("%s -d %s%s %s %s", tool, g.cli.Device(), gidFlag("-g", gc), args, g.srv.DataIP()))
		if err != nil {
			return Outcome{}, unsupportedIf(err, srvOut+cliOut)
		}
		p, err := ParsePingPong(cliOut)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Figure: p.USecPerIter, Unit: "µs/iter", Bytes: p.Bytes,
			Detail: fmt.Sprintf("%d iters, %.2f Mbit/s", p.Iters, p.MbitPerSec)}, nil
	}
}

func (g *sshGate) perf(tool, args string, lat bool) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		gs, gc, err := g.gids(ctx)
		if err != nil {
			return Outcome{}, err
		}
		// run returns the client's output, whose figures are the case's.
		run := func() (string, error) {
			srvOut, cliOut, err := g.pair(ctx, tool,
				fmt.Sprintf("%s -F -d %s%s %s", tool, g.srv.Device(), gidFlag("-x", gs), args),
				fmt.Sprintf("%s -F -d %s%s %s %s", tool, g.cli.Device(), gidFlag("-x", gc), args, g.srv.DataIP()))
			if err != nil {
				return cliOut, unsupportedIf(err, srvOut+cliOut)
			}
			return cliOut, nil
		}
		var l Lat
		var b BW
		note, err := rerunOnCalibration(run, func(out string) (err error) {
			if lat {
				l, err = ParseLat(out)
			} else {
				b, err = ParseBW(out)
			}
			return err
		})
		if err != nil {
			return Outcome{}, err
		}
		if lat {
			// A latency test is a ping-pong: each iteration moves its
			// message both ways.
			return Outcome{Figure: l.Typical, Unit: "µs", Bytes: 2 * int64(l.Bytes) * int64(l.Iters), Detail: fmt.Sprintf("%d B x %d: typical %.2f, avg %.2f, 99%% %.2f µs%s",
				l.Bytes, l.Iters, l.Typical, l.Avg, l.P99, note)}, nil
		}
		if strings.HasPrefix(tool, "ib_atomic") {
			return Outcome{Figure: b.MsgRateMpps * 1e6, Unit: "ops/s", Bytes: int64(b.Bytes) * int64(b.Iters),
				Detail: fmt.Sprintf("%d B x %d: %.3f MiB/s%s", b.Bytes, b.Iters, b.AverageMiBs, note)}, nil
		}
		return Outcome{Figure: b.AverageMiBs, Unit: "MiB/s", Bytes: int64(b.Bytes) * int64(b.Iters),
			Detail: fmt.Sprintf("%d B x %d: peak %.2f MiB/s%s", b.Bytes, b.Iters, b.PeakMiBs, note)}, nil
	}
}

// rerunOnCalibration runs a perftest pair (run returns the output whose
// figures count) and parses it. When perftest could not calibrate its
// cycle counter (a noisy virtual CPU: ErrClockCalibration), the exchange
// itself worked but its figures are void: the pair runs again, at most
// twice more. The note says so when a rerun gave the figures.
func rerunOnCalibration(run func() (string, error), parse func(out string) error) (note string, err error) {
	out, err := run()
	if err != nil {
		return "", err
	}
	err = parse(out)
	reruns := 0
	for errors.Is(err, ErrClockCalibration) && reruns < 2 {
		reruns++
		if out, err = run(); err != nil {
			return "", err
		}
		err = parse(out)
	}
	if err != nil {
		return "", err
	}
	if reruns > 0 {
		return fmt.Sprintf(" (run %d: perftest's clock calibration failed before)", reruns+1), nil
	}
	return "", nil
}

// multicast is ib_send_bw over UD with -g: the client sends to a
// multicast group the server joined (ibv_attach_mcast on RoCE). perftest
// refuses a multicast run on IPv4-mapped GIDs ("Found Incompatibility issue
// with GID types": the server's GID is the IPv6 MGID), so both sides use
// their RoCEv2 link-local GID. perftest's default MGID (ff01:0:2:c985::)
// is interface-local: the kernel never puts it on the wire. mgid is the
// same group with global scope (ff0e), in -M's decimal-byte form.
//
// Linux 6.1's rxe attaches the QP and adds the group's MAC to the netdev
// filter but does not join the IPv6 group, so the IPv6 layer drops the
// frames before they reach rxe's UDP socket (measured: the 500 frames crossed
// the fabric and reached the guest, perftest received 0). Later kernels
// join the group themselves. For rxe the server side therefore joins the
// group on its data netdev with a python3 socket for the duration of the
// run (joinGroup); a NIC that joins by itself does not need it.
const (
	mgid      = "255:14:0:0:0:2:201:133:0:0:0:0:0:0:0:1"
	mgidIPv6  = "ff0e:0:2:c985::1"
	joinGroup = `python3 -c "
import socket,struct,subprocess,time
ifn=subprocess.run(['ip','-o','-4','addr','show'],capture_output=True,text=True).stdout
dev=[l.split()[1] for l in ifn.splitlines() if l.split()[3].split('/')[0]=='%s'][0]
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_JOIN_GROUP,socket.inet_pton(socket.AF_INET6,'%s')+struct.pack('@I',socket.if_nametoindex(dev)))
time.sleep(%d)"`
)

func (g *sshGate) multicast(args string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		if _, _, err := g.gids(ctx); err != nil {
			return Outcome{}, err
		}
		gs, gc := g.gid6Srv, g.gid6Cli
		if !g.ib && (gs < 0 || gc < 0) {
			return Outcome{}, fmt.Errorf("no RoCEv2 link-local (fe80::) GID on both sides for the IPv6 multicast group")
		}
		srvCmd := fmt.Sprintf("ib_send_bw -F -c UD -g -M %s -d %s%s %s", mgid, g.srv.Device(), gidFlag("-x", gs), args)
		if g.srv.NIC() == "rxe" {
			join := fmt.Sprintf(joinGroup, g.srv.DataIP(), mgidIPv6, int(g.o.Timeout.Seconds()))
			// Start perftest only once the group is joined: under load
			// python3 may take seconds to start, and the client sends
			// right after the handshake.
			srvCmd = fmt.Sprintf("sh -c '%s & J=$!; until ip -6 maddr show | grep -q %s; do sleep 0.2; done; %s -p {port}; rc=$?; kill $J; exit $rc'",
				strings.ReplaceAll(join, "'", `'\''`), mgidIPv6, srvCmd)
		}
		var srvOut, cliOut string
		run := func() (string, error) {
			var err error
			srvOut, cliOut, err = g.pair(ctx, "ud_multicast", srvCmd,
				fmt.Sprintf("ib_send_bw -F -c UD -g -M %s -d %s%s %s %s", mgid, g.cli.Device(), gidFlag("-x", gc), args, g.srv.DataIP()))
			if err != nil {
				return "", unsupportedIf(err, srvOut+cliOut)
			}
			return srvOut, nil
		}
		var b BW
		var sides string
		note, err := rerunOnCalibration(run, func(string) (err error) {
			b, sides, err = multicastBW(srvOut, cliOut)
			return err
		})
		if err != nil {
			return Outcome{}, err
		}
		detail := fmt.Sprintf("UD multicast %d B x %d to %s%s%s", b.Bytes, b.Iters, mgidIPv6, sides, note)
		if g.ib {
			detail += " (joined through the SA)"
		}
		if g.srv.NIC() == "rxe" {
			detail += " (receiver joined the IPv6 group for rxe 6.1)"
		}
		return Outcome{Figure: b.AverageMiBs, Unit: "MiB/s", Detail: detail}, nil
	}
}

// multicastBW is ud_multicast's figure from the two sides' rows. The
// receiver (the group member) times from its first completion to its
// last, so datagrams that queued on the way and arrived in a burst read
// faster than the sender sent them; the sender's row is the rate it sent
// at. What was delivered is bounded by both: the figure is the lower,
// and sides names both. Either side alone stands in when the other
// printed no row.
func multicastBW(srvOut, cliOut string) (BW, string, error) {
	srv, serr := ParseBW(srvOut)
	cli, cerr := ParseBW(cliOut)
	switch {
	case serr != nil && cerr != nil:
		return BW{}, "", serr
	case serr != nil:
		return cli, "", nil
	case cerr != nil:
		return srv, "", nil
	}
	sides := fmt.Sprintf(": received %.1f MiB/s, sent %.1f MiB/s, the lower counts", srv.AverageMiBs, cli.AverageMiBs)
	if cli.AverageMiBs < srv.AverageMiBs {
		return cli, sides, nil
	}
	return srv, sides, nil
}

// integrityScript is the two-host check run with python3-pyverbs: random
// bytes RDMA-written into the server's buffer and read back, compared by
// sha256 on both sides. The stock tools have no such check: rdma-core 44's
// ibv_rc_pingpong --chk looks at the first byte of each page only, and the
// byte it expects is always 0; perftest 4.5 validates nothing.
//
//go:embed integrity.py
var integrityScript string

const integrityPath = "/tmp/hinic-integrity.py"

func (g *sshGate) integrity(size int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		gs, gc, err := g.gids(ctx)
		if err != nil {
			return Outcome{}, err
		}
		for _, h := range []Host{g.srv, g.cli} {
			cmd := fmt.Sprintf("cat > %s <<'HINIC_EOF'\n%sHINIC_EOF\npython3 -c 'import pyverbs'", integrityPath, integrityScript)
			if out, err := h.Run(ctx, cmd); err != nil {
				return Outcome{}, fmt.Errorf("%s: installing the check (needs python3-pyverbs): %v: %s", h.Name(), err, lastLine(out))
			}
		}
		srvOut, cliOut, err := g.pair(ctx, "data_integrity",
			fmt.Sprintf("python3 %s %s %d {port} %d", integrityPath, g.srv.Device(), gs, size),
			fmt.Sprintf("python3 %s %s %d {port} %d %s", integrityPath, g.cli.Device(), gc, size, g.srv.DataIP()))
		if err != nil {
			return Outcome{}, err
		}
		if !strings.Contains(srvOut, "integrity ok") || !strings.Contains(cliOut, "integrity ok") {
			return Outcome{}, fmt.Errorf("no verdict: server %q, client %q", lastLine(srvOut), lastLine(cliOut))
		}
		return Outcome{Figure: float64(size) / (1 << 20), Unit: "MiB checked",
			Detail: "random bytes RDMA WRITE to the server and READ back, sha256 equal on both sides (pyverbs); " + lastLine(cliOut)}, nil
	}
}

// timed wraps a tool run so that the guest measures it: the command is
// followed by a HINIC-ELAPSED-NS line, and the tool's exit status is
// kept. cmd must not contain single quotes.
func timed(cmd string) string {
	return fmt.Sprintf("sh -c 's=$(date +%%s%%N); %s; rc=$?; echo HINIC-ELAPSED-NS $(($(date +%%s%%N) - s)); exit $rc'", cmd)
}

var elapsedNS = regexp.MustCompile(`HINIC-ELAPSED-NS (\d+)`)

// elapsed returns the seconds a timed run took.
func elapsed(out string) (float64, error) {
	m := elapsedNS.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no elapsed time in the output")
	}
	ns, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || ns <= 0 {
		return 0, fmt.Errorf("elapsed time %q", m[1])
	}
	return float64(ns) / 1e9, nil
}

// rping: librdmacm's RDMA ping, client and server each connecting through
// the RDMA CM, n pings of RDMA READ and WRITE with the data validated on
// both sides (-V); the client prints each ping it verified.
func (g *sshGate) rping(n int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		srvOut, cliOut, err := g.pairOn(ctx, "rping",
			timed(fmt.Sprintf("rping -s -a %s -p {port} -C %d -V", g.srv.DataIP(), n)),
			timed(fmt.Sprintf("rping -c -a %s -p {port} -C %d -V -v", g.srv.DataIP(), n)), cmListening)
		note := ""
		if err != nil {
			if !rpingExitRace(err, cliOut, n) {
				return Outcome{}, unsupportedIf(err, srvOut+cliOut)
			}
			note = "; " + rpingRaceNote
		}
		if got := strings.Count(cliOut, "ping data: "); got != n {
			return Outcome{}, fmt.Errorf("the client verified %d pings, want %d: %s", got, n, lastLine(cliOut))
		}
		secs, err := elapsed(cliOut)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Figure: float64(n) / secs, Unit: "pings/s",
			Detail: fmt.Sprintf("%d pings validated in %.2f s, connection set-up and teardown included%s", n, secs, note)}, nil
	}
}

// rpingRaceNote is the detail of an rping run whose client failed only
// in rping's own exit race.
const rpingRaceNote = "the client's exit status is rping's exit race (its CM event thread read the channel main had closed; fixed in rdma-core after v44)"

// rpingExitRace says whether err is only rping's exit race: rping of
// rdma-core 44 lets its CM event thread call rdma_get_cm_event once more
// after main, done with every ping, has destroyed the event channel; the
// thread then prints "rdma_get_cm_event: Bad file descriptor" and exits
// the process with a failure although the test passed (rdma-core fixed
// it in 2025, "rping: Fix spurious failure return codes"). Only a client
// that failed that way after verifying all n pings, beside a server that
// did not fail, counts.
func rpingExitRace(err error, cliOut string, n int) bool {
	var pe *pairError
	return errors.As(err, &pe) && pe.side == "client" && pe.srvErr == nil &&
		strings.Contains(cliOut, "rdma_get_cm_event: Bad file descriptor") &&
		strings.Count(cliOut, "ping data: ") == n
}

// cmatose runs ucmatose (RC, connected through the RDMA CM) or udaddy
// (UD, its QP number and Q_Key resolved by SIDR): one connection, n
// messages each way; both sides must end with "return status 0".
func (g *sshGate) cmatose(tool string, n int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		// ucmatose takes a port (-p); udaddy always uses 7174 (its -p
		// is the port space).
		port, ready := "-p {port} ", cmListening
		if tool == "udaddy" {
			port, ready.fixed = "", udaddyPort
		}
		srvOut, cliOut, err := g.pairOn(ctx, tool,
			timed(fmt.Sprintf("%s -b %s %s-c 1 -C %d", tool, g.srv.DataIP(), port, n)),
			timed(fmt.Sprintf("%s -s %s -b %s %s-c 1 -C %d", tool, g.srv.DataIP(), g.cli.DataIP(), port, n)),
			ready)
		if err != nil {
			return Outcome{}, unsupportedIf(err, srvOut+cliOut)
		}
		for side, out := range map[string]string{"server": srvOut, "client": cliOut} {
			if !strings.Contains(out, "return status 0") {
				return Outcome{}, fmt.Errorf("%s: no \"return status 0\": %s", side, lastLine(out))
			}
		}
		secs, err := elapsed(cliOut)
		if err != nil {
			return Outcome{}, err
		}
		kind := "RC"
		if tool == "udaddy" {
			kind = "UD, SIDR"
		}
		return Outcome{Figure: secs, Unit: "s",
			Detail: fmt.Sprintf("%s: 1 connection, %d messages each way, address and route resolved by librdmacm", kind, n)}, nil
	}
}

// udaddyPort is the RDMA CM port udaddy (rdma-core 44) always uses.
const udaddyPort = 7174

// perfCM is a perftest bandwidth test connected through the RDMA CM (-R)
// instead of its TCP exchange.
func (g *sshGate) perfCM(tool, args string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		run := func() (string, error) {
			srvOut, cliOut, err := g.pairOn(ctx, tool+"_rdma_cm",
				fmt.Sprintf("%s -F -R -d %s %s", tool, g.srv.Device(), args),
				fmt.Sprintf("%s -F -R -d %s %s %s", tool, g.cli.Device(), args, g.srv.DataIP()), cmListening)
			if err != nil {
				return cliOut, unsupportedIf(err, srvOut+cliOut)
			}
			return cliOut, nil
		}
		var b BW
		note, err := rerunOnCalibration(run, func(out string) (err error) {
			b, err = ParseBW(out)
			return err
		})
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Figure: b.AverageMiBs, Unit: "MiB/s",
			Detail: fmt.Sprintf("%d B x %d over rdma_cm: peak %.2f MiB/s%s", b.Bytes, b.Iters, b.PeakMiBs, note)}, nil
	}
}

// unsupportedMarkers are what the tools print when the device lacks a
// feature (rather than failing at it).
var unsupportedMarkers = []string{
	"not supported", "Not supported", "Operation not supported", "doesn't support", "Unsupported",
}

// unsupportedIf wraps err as ErrUnsupported when the output says the
// device cannot do it.
func unsupportedIf(err error, out string) error {
	// perftest's header says "PCIe relax order: Unsupported" on every
	// virtual device; that is not the case's feature.
	out = strings.ReplaceAll(out, "PCIe relax order: Unsupported", "")
	for _, m := range unsupportedMarkers {
		if strings.Contains(out, m) {
			return fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
	}
	return err
}
