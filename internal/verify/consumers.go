package verify

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The consumer cases of the SSH gate: UCX, libfabric and Open MPI, the
// stacks RDMA users run, across the two guests (docs/verify.md).

// UCXTransport is one transport of `ucx_info -d` on one device.
type UCXTransport struct {
	Transport string // rc_verbs, ud_verbs, tcp, ...
	Device    string // rxe0:1, ens4, memory, ...
}

// ParseUCXInfo reads the transports of `ucx_info -d`: each "Transport:"
// line and the "Device:" line that follows it.
func ParseUCXInfo(out string) ([]UCXTransport, error) {
	var ts []UCXTransport
	tl := ""
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(strings.TrimLeft(l, "# \t"))
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "Transport:":
			tl = f[1]
		case "Device:":
			if tl != "" {
				ts = append(ts, UCXTransport{Transport: tl, Device: f[1]})
				tl = ""
			}
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("ucx_info -d lists no transport")
	}
	return ts, nil
}

// UCXPerf is the final row of `ucx_perftest -f -v` (CSV): latencies in
// µs, bandwidths in MB/s (UCX's MB is 2^20 bytes), message rates in
// messages per second.
type UCXPerf struct {
	Iters                      int64
	LatMedian, LatAvg, LatAll  float64
	BWAvg, BWAll, MRAvg, MRAll float64
}

var ucxCSV = regexp.MustCompile(`(?m)^\s*(\d+),([0-9.]+),([0-9.]+),([0-9.]+),([0-9.]+),([0-9.]+),([0-9.]+),([0-9.]+)\s*$`)

// ParseUCXPerf reads the result row of `ucx_perftest -f -v`. An error
// names UCX's own error line when there is one.
func ParseUCXPerf(out string) (UCXPerf, error) {
	m := ucxCSV.FindAllStringSubmatch(out, -1)
	if m == nil {
		return UCXPerf{}, fmt.Errorf("no result row: %s", ucxError(out))
	}
	row := m[len(m)-1]
	var v [8]float64
	for i := range v {
		x, err := strconv.ParseFloat(row[i+1], 64)
		if err != nil {
			return UCXPerf{}, fmt.Errorf("result row %q: %v", row[0], err)
		}
		v[i] = x
	}
	p := UCXPerf{Iters: int64(v[0]), LatMedian: v[1], LatAvg: v[2], LatAll: v[3], BWAvg: v[4], BWAll: v[5], MRAvg: v[6], MRAll: v[7]}
	if p.Iters <= 0 {
		return p, fmt.Errorf("result row with %d iterations", p.Iters)
	}
	return p, nil
}

var ucxErrLine = regexp.MustCompile(`(?m)^.*(UCX  ERROR|Fatal:|ERROR).*$`)

// ucxError is UCX's first error line of out, or its last line.
func ucxError(out string) string {
	if m := ucxErrLine.FindString(out); m != "" {
		// Drop the timestamp and host prefix: "[1796...] [vm-b:355 :0] file.c:549 UCX ERROR ..."
		if i := strings.Index(m, "UCX  ERROR"); i >= 0 {
			return strings.TrimSpace(m[i:])
		}
		if i := strings.Index(m, "Fatal:"); i >= 0 {
			return strings.TrimSpace(m[i:])
		}
		return strings.TrimSpace(m)
	}
	return lastLine(out)
}

// baselineUnsupported turns the failure of a consumer case on a baseline
// NIC (Soft-RoCE) into "unsupported", naming the failure: the consumer
// cannot use that device. On HiNIC a failure stays a failure.
func (g *sshGate) baselineUnsupported(o Outcome, err error) (Outcome, error) {
	if err == nil || g.srv.NIC() == "hicain" {
		return o, err
	}
	return o, fmt.Errorf("%w: fails on %s: %v", ErrUnsupported, g.srv.NIC(), err)
}

// ucxInfo checks that UCX finds the device's verbs transports on both
// hosts, and that it offers no mlx5 transport for it.
func (g *sshGate) ucxInfo(ctx context.Context) (Outcome, error) {
	var details []string
	n := 0
	for _, h := range []Host{g.srv, g.cli} {
		out, err := h.Run(ctx, "ucx_info -d 2>&1")
		g.save("ucx_info", h.Name(), out)
		if err != nil {
			return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s: ucx_info -d: %v: %s", h.Name(), err, lastLine(out)))
		}
		ts, err := ParseUCXInfo(out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
		}
		dev := h.Device() + ":1"
		var on []string
		for _, t := range ts {
			if t.Device == dev {
				on = append(on, t.Transport)
			}
		}
		for _, want := range []string{"rc_verbs", "ud_verbs"} {
			if !contains(on, want) {
				return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s: ucx_info -d lists no %s on %s (it lists %v)", h.Name(), want, dev, on))
			}
		}
		for _, t := range on {
			if strings.HasSuffix(t, "_mlx5") {
				return Outcome{}, fmt.Errorf("%s: ucx_info -d lists %s on %s, a transport for ConnectX hardware", h.Name(), t, dev)
			}
		}
		n = len(on)
		details = append(details, fmt.Sprintf("%s %s: %s", h.Name(), dev, strings.Join(on, ", ")))
	}
	return Outcome{Figure: float64(n), Unit: "transports",
		Detail: strings.Join(details, "; ") + "; no rc_mlx5/dc_mlx5/ud_mlx5: those need a ConnectX device (mlx5dv), HiNIC's provider is libhicain"}, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ucxTLS is UCX_TLS for a case over one verbs transport. rc_verbs needs
// ud_verbs beside it for UCP's wireup (its auxiliary transport); the data
// lanes then take rc_verbs, the faster.
func ucxTLS(tl string) string {
	if tl == "rc_verbs" {
		return "rc_verbs,ud_verbs"
	}
	return tl
}

// ucxPerf runs ucx_perftest between the guests over one transport.
func (g *sshGate) ucxPerf(test, tl string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		name := "ucx_" + strings.TrimPrefix(test, "ucp_") + "_" + strings.TrimSuffix(tl, "_verbs")
		size, iters := g.o.BWSize, g.o.BWIters
		lat := strings.HasSuffix(test, "_lat")
		if lat {
			size, iters = 8, g.o.LatIters
		}
		env := fmt.Sprintf("UCX_TLS=%s UCX_NET_DEVICES=%s:1", ucxTLS(tl), g.srv.Device())
		cenv := fmt.Sprintf("UCX_TLS=%s UCX_NET_DEVICES=%s:1", ucxTLS(tl), g.cli.Device())
		srvOut, cliOut, err := g.pair(ctx, name,
			fmt.Sprintf("env %s ucx_perftest -p {port}", env),
			fmt.Sprintf("env %s ucx_perftest %s -p {port} -t %s -s %d -n %d -f -v", cenv, g.srv.DataIP(), test, size, iters))
		if err != nil {
			return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s (client: %s; server: %s)", err, ucxError(cliOut), ucxError(srvOut)))
		}
		p, err := ParseUCXPerf(cliOut)
		if err != nil {
			return g.baselineUnsupported(Outcome{}, err)
		}
		moved := int64(size) * p.Iters
		if lat {
			moved *= 2
			return Outcome{Figure: p.LatMedian, Unit: "µs", Bytes: moved,
				Detail: fmt.Sprintf("%s over %s, %d B x %d: median %.2f, avg %.2f µs", test, tl, size, p.Iters, p.LatMedian, p.LatAvg)}, nil
		}
		return Outcome{Figure: p.BWAll, Unit: "MiB/s", Bytes: moved,
			Detail: fmt.Sprintf("%s over %s, %d B x %d: %.2f MiB/s, %.0f msg/s", test, tl, size, p.Iters, p.BWAll, p.MRAll)}, nil
	}
}

// FiInfo is one entry of `fi_info`: a provider, its domain and endpoint
// type.
type FiInfo struct {
	Provider, Fabric, Domain, Type, Protocol string
}

// ParseFiInfo reads fi_info's default output: blocks of "key: value"
// lines, each starting with "provider:".
func ParseFiInfo(out string) ([]FiInfo, error) {
	var fs []FiInfo
	var cur *FiInfo
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "provider":
			fs = append(fs, FiInfo{Provider: v})
			cur = &fs[len(fs)-1]
		case "fabric", "domain", "type", "protocol":
			if cur == nil {
				continue
			}
			switch k {
			case "fabric":
				cur.Fabric = v
			case "domain":
				cur.Domain = v
			case "type":
				cur.Type = v
			case "protocol":
				cur.Protocol = v
			}
		}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("fi_info lists no provider: %s", lastLine(out))
	}
	return fs, nil
}

// fiInfo checks that libfabric's verbs provider offers the device for
// FI_EP_MSG, and for FI_EP_RDM through ofi_rxm, on both hosts.
func (g *sshGate) fiInfo(ctx context.Context) (Outcome, error) {
	n := 0
	var details []string
	for _, h := range []Host{g.srv, g.cli} {
		for _, q := range []struct{ prov, ep string }{{"verbs", "FI_EP_MSG"}, {"verbs;ofi_rxm", "FI_EP_RDM"}} {
			out, err := h.Run(ctx, fmt.Sprintf("fi_info -p '%s' -t %s 2>&1", q.prov, q.ep))
			g.save("fi_info", h.Name()+"-"+strings.ToLower(q.ep), out)
			if err != nil {
				return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s: fi_info -p %s -t %s: %v: %s", h.Name(), q.prov, q.ep, err, lastLine(out)))
			}
			fs, err := ParseFiInfo(out)
			if err != nil {
				return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s: %w", h.Name(), err))
			}
			found := 0
			for _, f := range fs {
				if f.Provider == q.prov && f.Domain == h.Device() && f.Type == q.ep {
					found++
				}
			}
			if found == 0 {
				return g.baselineUnsupported(Outcome{}, fmt.Errorf("%s: fi_info -p %s lists no %s endpoint on %s", h.Name(), q.prov, q.ep, h.Device()))
			}
			n += found
			details = append(details, fmt.Sprintf("%s %s %s: %d", h.Name(), q.prov, q.ep, found))
		}
	}
	return Outcome{Figure: float64(n), Unit: "endpoints", Detail: strings.Join(details, ", ")}, nil
}

// consumerCases are the UCX, libfabric and Open MPI cases, after the
// verbs cases.
func (g *sshGate) consumerCases() []Case {
	cs := []Case{{Name: "ucx_info", Run: g.ucxInfo}}
	for _, tl := range []string{"rc_verbs", "ud_verbs"} {
		// ucx_perftest's UCP-level tests: tag matching, RMA put and
		// active messages (put_bw and am_bw without the ucp_ prefix
		// are UCT-level tests of one transport).
		for _, test := range []string{"tag_bw", "tag_lat", "ucp_put_bw", "ucp_am_bw"} {
			cs = append(cs, Case{Name: "ucx_" + strings.TrimPrefix(test, "ucp_") + "_" + strings.TrimSuffix(tl, "_verbs"), Run: g.ucxPerf(test, tl)})
		}
	}
	return append(cs,
		Case{Name: "fi_info", Run: g.fiInfo},
		Case{Name: "fi_pingpong_msg", Run: g.fiPingpong("verbs", "msg")},
		Case{Name: "fi_pingpong_rdm", Run: g.fiPingpong("verbs;ofi_rxm", "rdm")},
		Case{Name: "mpi_pingpong_lat", Run: func(ctx context.Context) (Outcome, error) { return g.baselineUnsupported(g.mpiLat(ctx)) }},
		Case{Name: "mpi_pingpong_bw", Run: func(ctx context.Context) (Outcome, error) { return g.baselineUnsupported(g.mpiBW(ctx)) }},
		Case{Name: "mpi_allreduce", Run: func(ctx context.Context) (Outcome, error) { return g.baselineUnsupported(g.mpiAllreduce(ctx)) }},
	)
}

// FiPingpongRow is one message size of fi_pingpong's table.
type FiPingpongRow struct {
	Bytes    int64
	Sent     int64
	MBs      float64 // MB/sec as fi_pingpong prints it (10^6 bytes)
	USecXfer float64
}

var fiRow = regexp.MustCompile(`(?m)^\s*(\d+)(k|m|g)?\s+(\d+)(k|m|g)?\s+=?\d+(k|m|g)?\s+[0-9.]+[kmg]?\s+[0-9.]+s\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s*$`)

// ParseFiPingpong reads fi_pingpong's result table.
func ParseFiPingpong(out string) ([]FiPingpongRow, error) {
	unit := func(s string) int64 {
		switch s {
		case "k":
			return 1 << 10
		case "m":
			return 1 << 20
		case "g":
			return 1 << 30
		}
		return 1
	}
	var rows []FiPingpongRow
	for _, m := range fiRow.FindAllStringSubmatch(out, -1) {
		var r FiPingpongRow
		b, _ := strconv.ParseInt(m[1], 10, 64)
		n, _ := strconv.ParseInt(m[3], 10, 64)
		r.Bytes, r.Sent = b*unit(m[2]), n*unit(m[4])
		r.MBs, _ = strconv.ParseFloat(m[6], 64)
		r.USecXfer, _ = strconv.ParseFloat(m[7], 64)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no result row: %s", lastLine(out))
	}
	return rows, nil
}

// fiPingpong runs fi_pingpong between the guests at the gate's
// bandwidth size twice: with data checking (-c), which must pass, then
// without, for the figure. The check fills and compares every message
// in the guests' own code, which under TCG took most of each transfer
// (HiNIC: 630 of 770 µs per 64 KiB), so the checked run measures the
// guest's CPU more than the NIC.
func (g *sshGate) fiPingpong(prov, ep string) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		run := func(name, check string) (FiPingpongRow, error) {
			args := fmt.Sprintf("-p '%s' -e %s -I %d -S %d%s", prov, ep, g.o.BWIters, g.o.BWSize, check)
			srvOut, cliOut, err := g.pair(ctx, name,
				fmt.Sprintf("fi_pingpong %s -d %s -B {port}", args, g.srv.Device()),
				fmt.Sprintf("fi_pingpong %s -d %s -P {port} %s", args, g.cli.Device(), g.srv.DataIP()))
			if err != nil {
				return FiPingpongRow{}, fmt.Errorf("%v (client: %s; server: %s)", err, lastLine(cliOut), lastLine(srvOut))
			}
			rows, err := ParseFiPingpong(cliOut)
			if err != nil {
				return FiPingpongRow{}, err
			}
			return rows[len(rows)-1], nil
		}
		checked, err := run("fi_pingpong_"+ep+"_checked", " -c")
		if err != nil {
			return g.baselineUnsupported(Outcome{}, err)
		}
		r, err := run("fi_pingpong_"+ep, "")
		if err != nil {
			return g.baselineUnsupported(Outcome{}, err)
		}
		mibs := r.MBs * 1e6 / (1 << 20)
		// Both runs moved data while the case's CPU was metered.
		return Outcome{Figure: mibs, Unit: "MiB/s", Bytes: 2*r.Bytes*r.Sent + 2*checked.Bytes*checked.Sent,
			Detail: fmt.Sprintf("%s FI_EP_%s, %d B x %d: %.2f µs per transfer; data checked in a run before (-c): %.2f µs per transfer",
				prov, strings.ToUpper(ep), r.Bytes, r.Sent, r.USecXfer, checked.USecXfer)}, nil
	}
}
