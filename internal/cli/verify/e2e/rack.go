package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/verify"
)

// RackRunDir finds the run directory of --rack: a directory holding
// state.json, a spec file (its run-dir), or a rack name.
func RackRunDir(rack string) (string, error) {
	if st, err := os.Stat(rack); err == nil {
		if st.IsDir() {
			return rack, nil
		}
		r, err := deploy.ReadRack(rack)
		if err != nil {
			return "", err
		}
		if err := r.Defaults(); err != nil {
			return "", err
		}
		return r.RunDir, nil
	}
	if strings.ContainsAny(rack, "/") {
		return "", fmt.Errorf("--rack %s: no such file or directory", rack)
	}
	return deploy.DefaultRunDir(rack), nil
}

// host adapts a deployed guest and its SSH connection to verify.Host.
type host struct {
	g *deploy.GuestState
	c *deploy.Client
}

func (h *host) Name() string   { return h.g.Name }
func (h *host) DataIP() string { return h.g.DataIP }
func (h *host) Device() string { return h.g.RDMADev }
func (h *host) NIC() string    { return h.g.NIC }
func (h *host) Link() string   { return cmp.Or(h.g.Link, deploy.LinkEth) }
func (h *host) Run(ctx context.Context, cmd string) (string, error) {
	return h.c.Run(ctx, cmd)
}

func runRack(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	runDir, err := RackRunDir(opts.Rack)
	if err != nil {
		return cmdutil.UsageErrorf("%v", err)
	}
	st, err := deploy.ReadState(runDir)
	if err != nil {
		return err
	}
	if st.Down {
		return fmt.Errorf("rack %s is down; deploy it with hinic deploy rack", st.Rack.Name)
	}
	pick := func(name string, def int) (*deploy.GuestState, error) {
		if name == "" {
			if def >= len(st.Guests) {
				return nil, cmdutil.UsageErrorf("rack %s has %d guests; the gate needs two", st.Rack.Name, len(st.Guests))
			}
			return &st.Guests[def], nil
		}
		if g := st.Guest(name); g != nil {
			return g, nil
		}
		return nil, cmdutil.UsageErrorf("rack %s has no guest %q", st.Rack.Name, name)
	}
	srvG, err := pick(opts.Server, 0)
	if err != nil {
		return err
	}
	cliG, err := pick(opts.Client, 1)
	if err != nil {
		return err
	}
	if srvG.Name == cliG.Name {
		return cmdutil.UsageErrorf("--server and --client must be two guests")
	}
	var hosts []*host
	for _, g := range []*deploy.GuestState{srvG, cliG} {
		if !g.Ready || g.RDMADev == "" {
			return fmt.Errorf("guest %s is not ready (%s); see hinic deploy status", g.Name, g.Error)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := st.Connect(cctx, g)
		cancel()
		if err != nil {
			return fmt.Errorf("ssh %s (%s): %w", g.Name, g.SSHAddr, err)
		}
		defer c.Close()
		hosts = append(hosts, &host{g: g, c: c})
	}

	o := verify.DefaultSSHOptions()
	if opts.changed != nil {
		if opts.changed("pingpong-iters") {
			o.PingPongIters = opts.Cases.PingPongIters
		}
		if opts.changed("bw-iters") {
			o.BWIters = opts.Cases.BWIters
		}
		if opts.changed("bw-size") {
			o.BWSize = opts.Cases.BWSize
		}
		if opts.changed("lat-iters") {
			o.LatIters = opts.Cases.LatIters
		}
	}
	o.Timeout = opts.CaseTimeout
	o.Save = opts.Save
	o.ActiveMTU = map[string]int{}
	for _, g := range st.Rack.Guests {
		if g.Name == srvG.Name || g.Name == cliG.Name {
			o.ActiveMTU[g.Name] = deploy.ActiveMTU(&st.Rack, g)
		}
	}
	o.GPUs = ServerGPUs(&st.Rack, srvG.Name)
	o.ClientGPUs = ServerGPUs(&st.Rack, cliG.Name)
	o.LinkCeiling = measureLinkCeiling
	o.LinkPorts = func(ctx context.Context) ([]verify.LinkPort, error) { return linkPorts(ctx, st) }
	cases := verify.SSHCases(hosts[0], hosts[1], o)
	// capture_icrc checks the rack's port captures: last, once the
	// other cases made the traffic; by name, with --case, on a rack
	// that captures.
	if st.Rack.Pcap {
		cases = append(cases, verify.Case{Name: CaseCaptureICRC, Run: func(ctx context.Context) (verify.Outcome, error) {
			return checkCaptures(ctx, opts, filepath.Join(st.Rack.RunDir, deploy.DirPcap))
		}})
	}
	if len(opts.Only) > 0 {
		var keep []verify.Case
		for _, c := range cases {
			for _, n := range opts.Only {
				if c.Name == n {
					keep = append(keep, c)
				}
			}
		}
		for _, n := range opts.Only {
			if n == CaseCaptureICRC && !st.Rack.Pcap {
				return cmdutil.UsageErrorf("--case %s: rack %s captures no port (deploy it with --pcap)", n, st.Rack.Name)
			}
		}
		if len(keep) == 0 {
			return cmdutil.UsageErrorf("--case %v matches no case of the SSH gate", opts.Only)
		}
		cases = keep
	}
	progress := func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }
	target := fmt.Sprintf("rack %s (%s -> %s, %s)", st.Rack.Name, cliG.Name, srvG.Name, srvG.NIC)
	rep := verify.RunMetered(ctx, "rack:"+st.Rack.Name, cases, progress, st.CPUSeconds)
	return report(opts, printer, rep, target)
}

// CaseCaptureICRC is the gate's case that checks the ICRC of every
// RoCEv2 or InfiniBand packet in the rack's port captures.
const CaseCaptureICRC = "capture_icrc"

// ServerGPUs are the GPUs the rack spec gives guest name: what the GPU
// cases of the gate check the guest's view against.
func ServerGPUs(r *deploy.Rack, name string) []verify.GPU {
	var gpus []verify.GPU
	for _, g := range r.Guests {
		if g.Name != name {
			continue
		}
		for _, id := range g.GPUs.IDs {
			x := verify.GPU{ID: id, MemoryMiB: g.GPUs.Memory}
			if deploy.HiLinkPort(r, g, id) != "" {
				x.HiLink = g.GPUs.HiLink
			}
			gpus = append(gpus, x)
		}
	}
	return gpus
}

// ceilingFrames is how many frames the raw HiLink ceiling moves: 128
// MiB of the GPU backend's 64 KiB frames, a fraction of a second.
const ceilingFrames = 2048

// measureLinkCeiling measures the raw HiLink ceiling on this host with
// the frames the GPU backend sends: hilink.DefaultMaxFrame octets.
func measureLinkCeiling(context.Context) (verify.LinkCeiling, error) {
	c, err := hilink.MeasureCeiling(hilink.DefaultMaxFrame, ceilingFrames)
	if err != nil {
		return verify.LinkCeiling{}, err
	}
	return verify.LinkCeiling{GBps: c.GBps(), Detail: fmt.Sprintf("%d frames of %d B through a plain seqpacket relay in %v",
		c.Frames, c.FrameSize, c.Elapsed.Round(time.Millisecond))}, nil
}

// linkPorts are the ports of the rack's HiLink switches that are up,
// as the switches report them; an error when one does not answer.
func linkPorts(ctx context.Context, st *deploy.State) ([]verify.LinkPort, error) {
	var out []verify.LinkPort
	for _, h := range deploy.HiLinkInfos(ctx, st) {
		if h.State != "running" || h.Ports == nil {
			return nil, fmt.Errorf("HiLink switch %s of rack %s is %s or does not answer (hinic deploy status)", h.Name, h.Rack, h.State)
		}
		for _, p := range h.Ports {
			if p.State == "up" {
				out = append(out, verify.LinkPort{Switch: h.Name, Peer: p.Peer, GPUs: p.GPUs})
			}
		}
	}
	return out, nil
}

// checkCaptures runs `hinic proto decode --check-icrc` on the capture of
// each guest port (the fabric flushes captures every second).
func checkCaptures(ctx context.Context, opts *Options, dir string) (verify.Outcome, error) {
	time.Sleep(1500 * time.Millisecond)
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	sort.Strings(files)
	if len(files) == 0 {
		return verify.Outcome{}, fmt.Errorf("no captures in %s", dir)
	}
	bin := opts.Hinic
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return verify.Outcome{}, err
		}
	}
	var details []string
	var bad []string
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || st.Size() <= 24 {
			continue // an unused port: only the pcap header
		}
		cmd := exec.CommandContext(ctx, bin, "proto", "decode", "--check-icrc", "-o", "json", f)
		var stderr strings.Builder
		cmd.Stdout = nil
		cmd.Stderr = &stderr
		err = cmd.Run()
		summary := strings.TrimSpace(stderr.String())
		details = append(details, filepath.Base(f)+": "+summary)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == cmdutil.ExitVerifyFailed {
			bad = append(bad, filepath.Base(f))
		} else if err != nil {
			return verify.Outcome{}, fmt.Errorf("%s: %v: %s", f, err, summary)
		}
	}
	if len(details) == 0 {
		return verify.Outcome{}, fmt.Errorf("captures in %s are empty", dir)
	}
	if len(bad) > 0 {
		return verify.Outcome{Detail: strings.Join(details, "; ")}, fmt.Errorf("bad ICRCs in %s: %s", strings.Join(bad, ", "), strings.Join(details, "; "))
	}
	return verify.Outcome{Figure: float64(len(details)), Unit: "captures", Detail: strings.Join(details, "; ")}, nil
}
