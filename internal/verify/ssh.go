package verify

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// BasePort is the first TCP port of the tools' out-of-band exchange;
	// each case uses its own so a lingering server cannot confuse the next.
	BasePort int
}

// DefaultSSHOptions are TCG-sized.
func DefaultSSHOptions() SSHOptions {
	return SSHOptions{PingPongIters: 500, BWIters: 500, BWSize: 65536, LatIters: 500, IntegrityBytes: 8 << 20,
		Timeout: 180 * time.Second, BasePort: 18515}
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
}

// SSHCases returns the 15 cases of the gate between server and client:
// ibv_devices, ibv_devinfo, the rc/ud/srq pingpongs, the eight perftest
// bandwidth and latency tests, UD multicast and a data-integrity check.
// The GID indexes are chosen by the ibv_devinfo case; the server side of
// each tool starts first.
func SSHCases(server, client Host, o SSHOptions) []Case {
	g := &sshGate{srv: server, cli: client, o: o, gidSrv: -1, gidCli: -1, gid6Srv: -1, gid6Cli: -1, port: o.BasePort}
	if g.o.Timeout == 0 {
		g.o.Timeout = DefaultSSHOptions().Timeout
	}
	if g.port == 0 {
		g.port = 18515
	}
	if g.o.IntegrityBytes == 0 {
		g.o.IntegrityBytes = DefaultSSHOptions().IntegrityBytes
	}
	pp := fmt.Sprint(o.PingPongIters)
	bw := fmt.Sprintf("-n %d -s %d", o.BWIters, o.BWSize)
	lat := fmt.Sprintf("-n %d", o.LatIters)
	atomicBW := fmt.Sprintf("-n %d", o.BWIters)
	return []Case{
		{Name: "ibv_devices", Run: g.devices},
		{Name: "ibv_devinfo", Run: g.devinfo},
		{Name: "ibv_rc_pingpong", Run: g.pingpong("ibv_rc_pingpong", "-n "+pp)},
		{Name: "ibv_ud_pingpong", Run: g.pingpong("ibv_ud_pingpong", "-s 1024 -n "+pp)},
		{Name: "ibv_srq_pingpong", Run: g.pingpong("ibv_srq_pingpong", "-n "+pp)},
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
	}
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
		details = append(details, fmt.Sprintf("%s: %s port %d ACTIVE %s, RoCEv2 GID[%d] ::ffff:%s", h.Name(), h.Device(), p.Num, p.Link, gid, h.DataIP()))
	}
	return Outcome{Detail: strings.Join(details, "; ")}, nil
}

// gids returns the GID indexes chosen by devinfo, or finds them now if
// that case did not run (or failed).
func (g *sshGate) gids(ctx context.Context) (int, int, error) {
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
	g.port++
	port := g.port
	secs := int(g.o.Timeout.Seconds())
	wrap := func(cmd string) string {
		if strings.Contains(cmd, "{port}") {
			return fmt.Sprintf("timeout -s KILL %d %s", secs, strings.ReplaceAll(cmd, "{port}", fmt.Sprint(port)))
		}
		return fmt.Sprintf("timeout -s KILL %d %s -p %d", secs, cmd, port)
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout+15*time.Second)
	defer cancel()
	type result struct {
		out string
		err error
	}
	srvDone := make(chan result, 1)
	go func() {
		out, err := g.srv.Run(ctx, wrap(srvCmd))
		srvDone <- result{out, err}
	}()
	// Wait for the server's out-of-band listener (ss from iproute2).
	listening := false
	for i := 0; i < 100 && !listening; i++ {
		out, _ := g.srv.Run(ctx, fmt.Sprintf("ss -Hltn 'sport = :%d'", port))
		if strings.Contains(out, fmt.Sprint(port)) {
			listening = true
			break
		}
		select {
		case r := <-srvDone:
			g.save(name, "server", r.out)
			return r.out, "", fmt.Errorf("server exited before listening: %v: %s", r.err, lastLine(r.out))
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !listening {
		cancel()
		r := <-srvDone
		g.save(name, "server", r.out)
		return r.out, "", fmt.Errorf("server did not listen on port %d in 20 s", port)
	}
	cliOut, cliErr := g.cli.Run(ctx, wrap(cliCmd))
	g.save(name, "client", cliOut)
	var r result
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
		return r.out, cliOut, fmt.Errorf("client: %v: %s", cliErr, lastLine(cliOut))
	}
	if r.err != nil {
		return r.out, cliOut, fmt.Errorf("server: %v: %s", r.err, lastLine(r.out))
	}
	return r.out, cliOut, nil
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l[len(l)-1])
}

func (g *sshGate) pingpong(tool, args string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		gs, gc, err := g.gids(ctx)
		if err != nil {
			return Outcome{}, err
		}
		srvOut, cliOut, err := g.pair(ctx, tool,
			fmt.Sprintf("%s -d %s -g %d %s", tool, g.srv.Device(), gs, args),
			fmt.Sprintf("%s -d %s -g %d %s %s", tool, g.cli.Device(), gc, args, g.srv.DataIP()))
		if err != nil {
			return Outcome{}, unsupportedIf(err, srvOut+cliOut)
		}
		p, err := ParsePingPong(cliOut)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Figure: p.USecPerIter, Unit: "µs/iter",
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
				fmt.Sprintf("%s -F -d %s -x %d %s", tool, g.srv.Device(), gs, args),
				fmt.Sprintf("%s -F -d %s -x %d %s %s", tool, g.cli.Device(), gc, args, g.srv.DataIP()))
			if err != nil {
				return cliOut, unsupportedIf(err, srvOut+cliOut)
			}
			return cliOut, nil
		}
		cliOut, err := run()
		if err != nil {
			return Outcome{}, err
		}
		if lat {
			// The client's figures are the case's. When perftest could
			// not calibrate its cycle counter (a noisy virtual CPU), the
			// exchange itself worked but its times are infinite: run the
			// pair again, at most twice more, and say so.
			l, err := ParseLat(cliOut)
			reruns := 0
			for errors.Is(err, ErrClockCalibration) && reruns < 2 {
				reruns++
				if cliOut, err = run(); err != nil {
					return Outcome{}, err
				}
				l, err = ParseLat(cliOut)
			}
			if err != nil {
				return Outcome{}, err
			}
			detail := fmt.Sprintf("%d B x %d: typical %.2f, avg %.2f, 99%% %.2f µs", l.Bytes, l.Iters, l.Typical, l.Avg, l.P99)
			if reruns > 0 {
				detail += fmt.Sprintf(" (run %d: perftest's clock calibration failed before)", reruns+1)
			}
			return Outcome{Figure: l.Typical, Unit: "µs", Detail: detail}, nil
		}
		b, err := ParseBW(cliOut)
		if err != nil {
			return Outcome{}, err
		}
		if strings.HasPrefix(tool, "ib_atomic") {
			return Outcome{Figure: b.MsgRateMpps * 1e6, Unit: "ops/s",
				Detail: fmt.Sprintf("%d B x %d: %.3f MiB/s", b.Bytes, b.Iters, b.AverageMiBs)}, nil
		}
		return Outcome{Figure: b.AverageMiBs, Unit: "MiB/s",
			Detail: fmt.Sprintf("%d B x %d: peak %.2f MiB/s", b.Bytes, b.Iters, b.PeakMiBs)}, nil
	}
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
		if gs < 0 || gc < 0 {
			return Outcome{}, fmt.Errorf("no RoCEv2 link-local (fe80::) GID on both sides for the IPv6 multicast group")
		}
		srvCmd := fmt.Sprintf("ib_send_bw -F -c UD -g -M %s -d %s -x %d %s", mgid, g.srv.Device(), gs, args)
		if g.srv.NIC() == "rxe" {
			join := fmt.Sprintf(joinGroup, g.srv.DataIP(), mgidIPv6, int(g.o.Timeout.Seconds()))
			// Start perftest only once the group is joined: under load
			// python3 may take seconds to start, and the client sends
			// right after the handshake.
			srvCmd = fmt.Sprintf("sh -c '%s & J=$!; until ip -6 maddr show | grep -q %s; do sleep 0.2; done; %s -p {port}; rc=$?; kill $J; exit $rc'",
				strings.ReplaceAll(join, "'", `'\''`), mgidIPv6, srvCmd)
		}
		srvOut, cliOut, err := g.pair(ctx, "ud_multicast", srvCmd,
			fmt.Sprintf("ib_send_bw -F -c UD -g -M %s -d %s -x %d %s %s", mgid, g.cli.Device(), gc, args, g.srv.DataIP()))
		if err != nil {
			return Outcome{}, unsupportedIf(err, srvOut+cliOut)
		}
		// The server's row counts what reached the group member.
		b, err := ParseBW(srvOut)
		if err != nil {
			if b, err = ParseBW(cliOut); err != nil {
				return Outcome{}, err
			}
		}
		detail := fmt.Sprintf("UD multicast %d B x %d to %s", b.Bytes, b.Iters, mgidIPv6)
		if g.srv.NIC() == "rxe" {
			detail += " (receiver joined the IPv6 group for rxe 6.1)"
		}
		return Outcome{Figure: b.AverageMiBs, Unit: "MiB/s", Detail: detail}, nil
	}
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
