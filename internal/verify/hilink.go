package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The HiLink cases of the SSH gate (docs/verify.md, "The HiLink
// cases"): the GPUs' peer fabric as the guests see it, with
// hicart-smi topo, hicart-p2p and hicart-allreduce run in the server
// and, when its GPUs share the server's HiLink switch, in the client at
// the same time (the tools meet over the fabric). Figures are ratios to
// the raw link ceiling (SSHOptions.LinkCeiling) measured in the same
// run, never a threshold.

// UnitOfLinkCeiling is the unit of the HiLink cases' bandwidth figures:
// a rate as a multiple of the raw link ceiling measured in the same run.
const UnitOfLinkCeiling = "× link ceiling"

// Sizes of the HiLink runs: small enough for TCG guests, whose CPUs
// fill and check every buffer.
const (
	DefaultP2PSize      = 256 << 10
	DefaultP2PIters     = 4
	DefaultAllreduceMax = 256 << 10
	// maxTopoGPUs bounds the GPUs of one topo or p2p report: 8 ids of
	// a guest and 8 of others (hicart's HICART_TOPO_MAX and PEER_MAX
	// are 16).
	maxTopoGPUs = 16
	// linkToolTimeout bounds the tools' wait for the other guests.
	linkToolTimeout = 600
)

// LinkCeiling is the raw HiLink ceiling measured on the host: payload
// GB/s of frames of the GPU backend's size through a plain relay.
type LinkCeiling struct {
	GBps   float64
	Detail string // how it was measured: frames and their size
}

// LinkPort is a HiLink port with a GPU on it, as the host's switch
// shows it.
type LinkPort struct {
	Switch string // the HiLink switch
	Peer   string // the port's name: GUEST/gpuID
	GPUs   []int
}

// topo entries of hicart-smi topo.
const (
	topoSelf = "X"
	topoHL   = "HL"
	topoSYS  = "SYS"
	topoNone = "-"
)

// TopoGPU is one GPU of `hicart-smi topo --json`.
type TopoGPU struct {
	GPUID       int    `json:"gpu_id"`
	Ordinal     int    `json:"ordinal"` // -1 for a GPU of another guest
	Local       bool   `json:"local"`
	HiLinkPorts int    `json:"hilink_ports"`
	Name        string `json:"name"`
}

// TopoReport is `hicart-smi topo --json`.
type TopoReport struct {
	GPUs   []TopoGPU  `json:"gpus"`
	Matrix [][]string `json:"matrix"`
}

// ParseTopo reads `hicart-smi topo --json`: at most 16 GPUs with
// distinct gpu_ids 0..7 (an id may be a local and a remote one only
// if the tool lists it twice, which is an error too), a square matrix
// of X, HL, SYS and -, X exactly on the diagonal.
func ParseTopo(out string) (*TopoReport, error) {
	r, err := decodeJSONLine[TopoReport]("hicart-smi topo --json", out)
	if err != nil {
		return nil, err
	}
	n := len(r.GPUs)
	if n == 0 || n > maxTopoGPUs || len(r.Matrix) != n {
		return nil, fmt.Errorf("hicart-smi topo: %d GPUs, %d matrix rows", n, len(r.Matrix))
	}
	seen := map[int]bool{}
	for i, g := range r.GPUs {
		if g.GPUID < 0 || g.GPUID > 7 || seen[g.GPUID] || g.Local != (g.Ordinal >= 0) || g.HiLinkPorts < 0 {
			return nil, fmt.Errorf("hicart-smi topo: GPU %d: gpu_id %d, ordinal %d, local %v, %d HiLink ports",
				i, g.GPUID, g.Ordinal, g.Local, g.HiLinkPorts)
		}
		seen[g.GPUID] = true
		if len(r.Matrix[i]) != n {
			return nil, fmt.Errorf("hicart-smi topo: row %d has %d entries, not %d", i, len(r.Matrix[i]), n)
		}
		for j, v := range r.Matrix[i] {
			if (v == topoSelf) != (i == j) || !slices.Contains([]string{topoSelf, topoHL, topoSYS, topoNone}, v) {
				return nil, fmt.Errorf("hicart-smi topo: [%d][%d] is %q", i, j, v)
			}
		}
	}
	return r, nil
}

// P2PGPU is one GPU of `hicart-p2p --json`.
type P2PGPU struct {
	GPUID int  `json:"gpu_id"`
	Local bool `json:"local"`
}

// P2PReport is `hicart-p2p --json`: row i, column j a copy from GPU i to
// GPU j, null in the rows of GPUs another guest measures.
type P2PReport struct {
	Size    int64        `json:"size"`
	Iters   int          `json:"iters"`
	GPUs    []P2PGPU     `json:"gpus"`
	BW      [][]*float64 `json:"bandwidth_gbps"`
	Latency [][]*float64 `json:"latency_us"`
}

// ParseP2P reads `hicart-p2p --json`: 2 to 16 GPUs with distinct
// gpu_ids, at least one local; both matrices square, a local GPU's row
// full of finite positive figures, another's all null.
func ParseP2P(out string) (*P2PReport, error) {
	r, err := decodeJSONLine[P2PReport]("hicart-p2p --json", out)
	if err != nil {
		return nil, err
	}
	n := len(r.GPUs)
	if n < 2 || n > maxTopoGPUs || r.Size <= 0 || r.Iters <= 0 || len(r.BW) != n || len(r.Latency) != n {
		return nil, fmt.Errorf("hicart-p2p: %d GPUs, size %d, iters %d, %d and %d matrix rows", n, r.Size, r.Iters, len(r.BW), len(r.Latency))
	}
	seen := map[int]bool{}
	local := 0
	for i, g := range r.GPUs {
		if g.GPUID < 0 || g.GPUID > 7 || seen[g.GPUID] {
			return nil, fmt.Errorf("hicart-p2p: GPU %d: gpu_id %d out of 0..7 or listed twice", i, g.GPUID)
		}
		seen[g.GPUID] = true
		if g.Local {
			local++
		}
		for _, m := range [][][]*float64{r.BW, r.Latency} {
			if len(m[i]) != n {
				return nil, fmt.Errorf("hicart-p2p: row %d has %d entries, not %d", i, len(m[i]), n)
			}
			for j, v := range m[i] {
				if (v != nil) != g.Local || (v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v <= 0)) {
					return nil, fmt.Errorf("hicart-p2p: [%d][%d] of gpu_id %d (local %v) is %s", i, j, g.GPUID, g.Local, showFigure(v))
				}
			}
		}
	}
	if local == 0 {
		return nil, errors.New("hicart-p2p: no local GPU")
	}
	return r, nil
}

func showFigure(v *float64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// AllreduceRow is one line of hicart-allreduce's table.
type AllreduceRow struct {
	Bytes, Count int64
	Type         string // float or bf16
	TimeUs       float64
	AlgBW, BusBW float64 // GB/s
	Wrong        int64
}

// AllreduceReport is hicart-allreduce's output.
type AllreduceReport struct {
	GPUIDs []int // the ring, in order
	Remote []bool
	Rows   []AllreduceRow
	// OutOfBounds is the sizes with a wrong element ("# Out of bounds
	// values : N OK|FAILED").
	OutOfBounds int
}

var (
	arHead = regexp.MustCompile(`^# hicart-allreduce: (\d+) GPUs in a ring \(gpu_id((?: \d+\*?)+);`)
	arRow  = regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+(float|bf16)\s+sum\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s*$`)
	arEnd  = regexp.MustCompile(`^# Out of bounds values : (\d+) (OK|FAILED)\s*$`)
)

// ParseAllreduce reads hicart-allreduce's output: the ring line, the
// table, the closing count. It fails when a part is missing (the run
// died), when a figure is not a finite non-negative number, when a
// row's count is not its size in elements, or when the closing count
// is not the rows with a wrong element.
func ParseAllreduce(out string) (*AllreduceReport, error) {
	sc, err := toolLines("hicart-allreduce", out)
	if err != nil {
		return nil, err
	}
	r := &AllreduceReport{OutOfBounds: -1}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := arHead.FindStringSubmatch(line); m != nil {
			if r.GPUIDs != nil {
				return nil, errors.New("hicart-allreduce: a second ring line")
			}
			for _, f := range strings.Fields(m[2]) {
				id, _ := strconv.Atoi(strings.TrimSuffix(f, "*"))
				if id > 7 || slices.Contains(r.GPUIDs, id) || len(r.GPUIDs) == maxTopoGPUs {
					return nil, fmt.Errorf("hicart-allreduce: ring %q", m[2])
				}
				r.GPUIDs = append(r.GPUIDs, id)
				r.Remote = append(r.Remote, strings.HasSuffix(f, "*"))
			}
			if n, _ := strconv.Atoi(m[1]); n != len(r.GPUIDs) || n < 2 {
				return nil, fmt.Errorf("hicart-allreduce: %s GPUs in a ring of %d", m[1], len(r.GPUIDs))
			}
			continue
		}
		if m := arEnd.FindStringSubmatch(line); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || r.OutOfBounds >= 0 {
				return nil, fmt.Errorf("hicart-allreduce: %q", line)
			}
			r.OutOfBounds = n
			continue
		}
		m := arRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if r.GPUIDs == nil || r.OutOfBounds >= 0 || len(r.Rows) == maxTAPTests {
			return nil, fmt.Errorf("hicart-allreduce: a row outside the table: %q", line)
		}
		row := AllreduceRow{Type: m[3]}
		var errs [7]error
		row.Bytes, errs[0] = strconv.ParseInt(m[1], 10, 64)
		row.Count, errs[1] = strconv.ParseInt(m[2], 10, 64)
		row.TimeUs, errs[2] = strconv.ParseFloat(m[4], 64)
		row.AlgBW, errs[3] = strconv.ParseFloat(m[5], 64)
		row.BusBW, errs[4] = strconv.ParseFloat(m[6], 64)
		row.Wrong, errs[5] = strconv.ParseInt(m[7], 10, 64)
		esize := int64(4)
		if row.Type == "bf16" {
			esize = 2
		}
		if err := errors.Join(errs[:]...); err != nil || row.Bytes <= 0 || row.Count != row.Bytes/esize || row.Wrong > row.Count {
			return nil, fmt.Errorf("hicart-allreduce: row %q", line)
		}
		for _, v := range []float64{row.TimeUs, row.AlgBW, row.BusBW} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("hicart-allreduce: row %q", line)
			}
		}
		r.Rows = append(r.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hicart-allreduce: %w", err)
	}
	switch {
	case r.GPUIDs == nil:
		return nil, fmt.Errorf("hicart-allreduce: no ring line (the run did not start): %s", lastLine(out))
	case r.OutOfBounds < 0:
		return nil, fmt.Errorf("hicart-allreduce: no closing count (the run did not finish): %s", lastLine(out))
	}
	bad := 0
	for _, row := range r.Rows {
		if row.Wrong > 0 {
			bad++
		}
	}
	if bad != r.OutOfBounds {
		return nil, fmt.Errorf("hicart-allreduce: %d sizes with wrong elements, the tool counts %d", bad, r.OutOfBounds)
	}
	return r, nil
}

// CheckAllreduce checks a report against the run: the ring is ids in
// order, every size from minBytes doubling to maxBytes of both types
// is there once, and no element is wrong.
func CheckAllreduce(r *AllreduceReport, ids []int, minBytes, maxBytes int64) error {
	if !slices.Equal(r.GPUIDs, ids) {
		return fmt.Errorf("a ring of gpu_ids %v, the run has %v", r.GPUIDs, ids)
	}
	var want []string
	for _, t := range []string{"float", "bf16"} {
		for b := minBytes; b <= maxBytes; b *= 2 {
			want = append(want, fmt.Sprintf("%s %d", t, b))
		}
	}
	var got, wrong []string
	for _, row := range r.Rows {
		got = append(got, fmt.Sprintf("%s %d", row.Type, row.Bytes))
		if row.Wrong > 0 {
			wrong = append(wrong, fmt.Sprintf("%s %d B: %d of %d elements", row.Type, row.Bytes, row.Wrong, row.Count))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("wrong elements: %s", strings.Join(wrong, "; "))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("sizes %v, want %v", got, want)
	}
	return nil
}

// linkHost is a host of a HiLink run with its GPUs on the switch.
type linkHost struct {
	h   Host
	ids []int // gpu_ids on the switch
}

// linkRun returns the HiLink switch of the server's GPUs and the hosts
// whose GPUs are on it: the server, then the client if it has GPUs
// there. The switch is "" when no server GPU has a HiLink port.
func (g *sshGate) linkRun() (string, []linkHost) {
	sw := ""
	for _, x := range g.o.GPUs {
		if x.HiLink != "" {
			sw = x.HiLink
			break
		}
	}
	if sw == "" {
		return "", nil
	}
	on := func(gs []GPU) []int {
		var ids []int
		for _, x := range gs {
			if x.HiLink == sw {
				ids = append(ids, x.ID)
			}
		}
		return ids
	}
	hosts := []linkHost{{g.srv, on(g.o.GPUs)}}
	if ids := on(g.o.ClientGPUs); len(ids) > 0 {
		hosts = append(hosts, linkHost{g.cli, ids})
	}
	return sw, hosts
}

// remoteOf is the --remote list of hosts[i]: the others' gpu_ids.
func remoteOf(hosts []linkHost, i int) string {
	var ids []string
	for j, lh := range hosts {
		if j != i {
			for _, id := range lh.ids {
				ids = append(ids, strconv.Itoa(id))
			}
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return " --remote " + strings.Join(ids, ",")
}

// linkCases are the HiLink cases, when the server has GPUs: topo always
// (it checks the GPUs without HiLink too), p2p and the all-reduce when
// two GPUs or more are on the server's HiLink switch.
func (g *sshGate) linkCases() []Case {
	if len(g.o.GPUs) == 0 {
		return nil
	}
	cases := []Case{{Name: "hicart_smi_topo", Run: g.hicartTopo}}
	_, hosts := g.linkRun()
	n := 0
	for _, lh := range hosts {
		n += len(lh.ids)
	}
	if n >= 2 {
		cases = append(cases, Case{Name: "hicart_p2p", Run: g.hicartP2P}, Case{Name: "hicart_allreduce", Run: g.hicartAllreduce})
	}
	return cases
}

// onAll runs cmds[i] on hosts[i], all at once (the tools wait for each
// other over the fabric), and returns each output and exit status.
func onAll(ctx context.Context, hosts []linkHost, cmds []string, timeout time.Duration) ([]string, []int, error) {
	outs, rcs, errs := make([]string, len(hosts)), make([]int, len(hosts)), make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, lh := range hosts {
		wg.Go(func() {
			outs[i], rcs[i], errs[i] = runStatus(ctx, lh.h, cmds[i], timeout)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %s: %w", lh.h.Name(), cmds[i], errs[i])
			}
		})
	}
	wg.Wait()
	return outs, rcs, errors.Join(errs...)
}

// wantTopo is the entry of a topo matrix between a and b: X, HL when
// both have a HiLink port, SYS for two GPUs of the guest, else -.
func wantTopo(a, b TopoGPU, same bool) string {
	switch {
	case same:
		return topoSelf
	case a.HiLinkPorts > 0 && b.HiLinkPorts > 0:
		return topoHL
	case a.Local && b.Local:
		return topoSYS
	}
	return topoNone
}

// CheckTopo checks a host's topo against the spec: its own GPUs (mine)
// listed as local with a HiLink port exactly when the spec cables them,
// the remote ones exactly remote, and every entry what the ports give.
// It returns the linked (HL) and unlinked pairs.
func CheckTopo(r *TopoReport, mine []GPU, remote []int) (hl, other int, err error) {
	var local, far []int
	for _, x := range r.GPUs {
		if x.Local {
			local = append(local, x.GPUID)
		} else {
			far = append(far, x.GPUID)
		}
	}
	var want []int
	for _, x := range mine {
		want = append(want, x.ID)
	}
	if !sameSet(local, want) || !sameSet(far, remote) {
		return 0, 0, fmt.Errorf("topo lists gpu_ids %v here and %v elsewhere, the spec %v and %v", local, far, want, remote)
	}
	for _, x := range r.GPUs {
		if !x.Local {
			continue
		}
		i := slices.IndexFunc(mine, func(m GPU) bool { return m.ID == x.GPUID })
		if (mine[i].HiLink != "") != (x.HiLinkPorts > 0) {
			return 0, 0, fmt.Errorf("gpu_id %d has %d HiLink ports, the spec cables it to %q", x.GPUID, x.HiLinkPorts, mine[i].HiLink)
		}
	}
	for i, a := range r.GPUs {
		for j, b := range r.GPUs {
			w := wantTopo(a, b, i == j)
			if r.Matrix[i][j] != w {
				return 0, 0, fmt.Errorf("topo: gpu_id %d to %d is %s, want %s", a.GPUID, b.GPUID, r.Matrix[i][j], w)
			}
			if i != j && w == topoHL {
				hl++
			} else if i != j {
				other++
			}
		}
	}
	return hl, other, nil
}

func sameSet(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// hicartTopo runs hicart-smi topo on the server and, if it has GPUs, the
// client, each naming the other's GPUs on its HiLink switch; it checks
// each matrix against the spec and, with SSHOptions.LinkPorts, the
// HiLink switches' own view: every GPU up on its rack's switch only, a
// GPU without HiLink on none.
func (g *sshGate) hicartTopo(ctx context.Context) (Outcome, error) {
	type side struct {
		h          Host
		mine, peer []GPU
	}
	sides := []side{{g.srv, g.o.GPUs, g.o.ClientGPUs}}
	if len(g.o.ClientGPUs) > 0 {
		sides = append(sides, side{g.cli, g.o.ClientGPUs, g.o.GPUs})
	}
	var details []string
	hlPairs := 0
	for _, s := range sides {
		sw := ""
		for _, x := range s.mine {
			if x.HiLink != "" {
				sw = x.HiLink
			}
		}
		var remote []int
		var apart []string
		for _, x := range s.peer {
			if sw != "" && x.HiLink == sw {
				remote = append(remote, x.ID)
			} else {
				where := "no HiLink port"
				if x.HiLink != "" {
					where = "on " + x.HiLink
				}
				apart = append(apart, fmt.Sprintf("%d (%s)", x.ID, where))
			}
		}
		cmd := "hicart-smi topo --json"
		if len(remote) > 0 {
			cmd += " --remote " + joinInts(remote)
		}
		out, err := s.h.Run(ctx, cmd)
		g.save("hicart_smi_topo", s.h.Name(), out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %s: %w: %s", s.h.Name(), cmd, err, lastLine(out))
		}
		r, err := ParseTopo(out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", s.h.Name(), err)
		}
		hl, other, err := CheckTopo(r, s.mine, remote)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", s.h.Name(), err)
		}
		hlPairs += hl
		d := fmt.Sprintf("%s: %s; %d pairs HL, %d not", s.h.Name(), topoRows(r), hl, other)
		if len(apart) > 0 {
			d += fmt.Sprintf("; the other guest's gpu_ids %s not on this HiLink switch, not listed", strings.Join(apart, ", "))
		}
		details = append(details, d)
	}
	if g.o.LinkPorts != nil {
		d, err := g.checkLinkPorts(ctx)
		if err != nil {
			return Outcome{}, err
		}
		details = append(details, d)
	}
	return Outcome{Figure: float64(hlPairs), Unit: "HL pairs", Detail: strings.Join(details, "; ")}, nil
}

// checkLinkPorts compares the HiLink switches' ports with the spec: each
// GPU of the two hosts is up on its own switch and on no other, under
// its name GUEST/gpuID; one without HiLink is on none.
func (g *sshGate) checkLinkPorts(ctx context.Context) (string, error) {
	ports, err := g.o.LinkPorts(ctx)
	if err != nil {
		return "", fmt.Errorf("the HiLink switches' status: %w", err)
	}
	on := map[string][]string{} // GUEST/gpuID: switches
	per := map[string]int{}
	for _, p := range ports {
		on[p.Peer] = append(on[p.Peer], p.Switch)
		per[p.Switch]++
	}
	for _, s := range []struct {
		h    Host
		gpus []GPU
	}{{g.srv, g.o.GPUs}, {g.cli, g.o.ClientGPUs}} {
		for _, x := range s.gpus {
			name := fmt.Sprintf("%s/gpu%d", s.h.Name(), x.ID)
			want := []string{}
			if x.HiLink != "" {
				want = []string{x.HiLink}
			}
			if got := on[name]; !slices.Equal(append([]string{}, got...), want) {
				return "", fmt.Errorf("%s is up on HiLink switches %v, the spec cables it to %v", name, got, want)
			}
		}
	}
	var parts []string
	for _, sw := range slices.Sorted(func(yield func(string) bool) {
		for k := range per {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s %d", sw, per[sw]))
	}
	return "GPUs up per HiLink switch: " + strings.Join(parts, ", "), nil
}

func joinInts(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// topoRows shows a matrix compactly: "0:X HL; 1:HL X".
func topoRows(r *TopoReport) string {
	rows := make([]string, len(r.GPUs))
	for i, x := range r.GPUs {
		rows[i] = fmt.Sprintf("%d:%s", x.GPUID, strings.Join(r.Matrix[i], " "))
	}
	return "topo " + strings.Join(rows, "; ")
}

// ceiling measures the raw link ceiling, when the gate can.
func (g *sshGate) ceiling(ctx context.Context) (LinkCeiling, error) {
	if g.o.LinkCeiling == nil {
		return LinkCeiling{}, errors.New("no link ceiling to measure against (SSHOptions.LinkCeiling)")
	}
	c, err := g.o.LinkCeiling(ctx)
	if err == nil && (c.GBps <= 0 || math.IsNaN(c.GBps) || math.IsInf(c.GBps, 0)) {
		err = fmt.Errorf("link ceiling %v GB/s", c.GBps)
	}
	return c, err
}

// hicartP2P runs hicart-p2p over every GPU on the server's HiLink
// switch, in every host that has some, and joins the hosts' rows into
// one matrix in which every pair was measured once. Each host with two
// GPUs there runs hicart_test -p too: peer copies through the switch
// both ways, every byte compared, and the peer errors. The figure is
// the slowest pair's bandwidth over the raw link ceiling measured right
// after.
func (g *sshGate) hicartP2P(ctx context.Context) (Outcome, error) {
	_, hosts := g.linkRun()
	size, iters := g.o.P2PSize, g.o.P2PIters
	cmds := make([]string, len(hosts))
	for i := range hosts {
		cmds[i] = fmt.Sprintf("hicart-p2p%s --size %d --iters %d --timeout %d --json", remoteOf(hosts, i), size, iters, linkToolTimeout)
	}
	outs, rcs, err := onAll(ctx, hosts, cmds, time.Duration(linkToolTimeout+60)*time.Second)
	for i, lh := range hosts {
		g.save("hicart_p2p", lh.h.Name(), outs[i])
	}
	if err != nil {
		return Outcome{}, err
	}
	var all []int
	for _, lh := range hosts {
		all = append(all, lh.ids...)
	}
	bw := map[[2]int]float64{}
	lat := map[[2]int]float64{}
	for i, lh := range hosts {
		if rcs[i] != 0 {
			return Outcome{}, fmt.Errorf("%s: hicart-p2p exited %d: %s", lh.h.Name(), rcs[i], lastLine(exitLine.ReplaceAllString(outs[i], "")))
		}
		r, err := ParseP2P(outs[i])
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", lh.h.Name(), err)
		}
		var ids, local []int
		for _, x := range r.GPUs {
			ids = append(ids, x.GPUID)
			if x.Local {
				local = append(local, x.GPUID)
			}
		}
		if !sameSet(ids, all) || !sameSet(local, lh.ids) || r.Size != int64(size) {
			return Outcome{}, fmt.Errorf("%s: hicart-p2p measured gpu_ids %v (local %v) at %d B, the run has %v (local %v) at %d B",
				lh.h.Name(), ids, local, r.Size, all, lh.ids, size)
		}
		for a, x := range r.GPUs {
			for b, y := range r.GPUs {
				if x.Local {
					bw[[2]int{x.GPUID, y.GPUID}] = *r.BW[a][b]
					lat[[2]int{x.GPUID, y.GPUID}] = *r.Latency[a][b]
				}
			}
		}
	}
	if len(bw) != len(all)*len(all) {
		return Outcome{}, fmt.Errorf("%d of the %d pairs measured", len(bw), len(all)*len(all))
	}
	var o Outcome
	var failed []string
	for _, lh := range hosts {
		if len(lh.ids) < 2 {
			continue
		}
		out, rc, err := runStatus(ctx, lh.h, "hicart_test -d 0 -p", hicartTestTimeout)
		g.save("hicart_p2p.peer_test", lh.h.Name(), out)
		if err != nil {
			return o, fmt.Errorf("%s: hicart_test -d 0 -p: %w", lh.h.Name(), err)
		}
		r, err := ParseTAP(out)
		if err != nil {
			return o, fmt.Errorf("%s: hicart_test -d 0 -p (exit %d): %w", lh.h.Name(), rc, err)
		}
		for _, t := range r.Tests {
			t.Name = lh.h.Name() + ": " + t.Name
			o.Tests = append(o.Tests, t)
			if t.Result == TestFail {
				failed = append(failed, t.Name)
			}
		}
		if rc != 0 && r.Failed == 0 {
			failed = append(failed, fmt.Sprintf("%s: hicart_test -p exited %d with every test ok", lh.h.Name(), rc))
		}
	}
	c, err := g.ceiling(ctx)
	if err != nil {
		return o, err
	}
	slices.Sort(all)
	low, lowAt := math.Inf(1), ""
	var rows []string
	minLat, maxLat := math.Inf(1), 0.0
	for _, a := range all {
		var row []string
		for _, b := range all {
			v := bw[[2]int{a, b}]
			row = append(row, fmt.Sprintf("%.3f", v))
			if a != b {
				if v < low {
					low, lowAt = v, fmt.Sprintf("%d->%d", a, b)
				}
				minLat, maxLat = min(minLat, lat[[2]int{a, b}]), max(maxLat, lat[[2]int{a, b}])
			}
		}
		rows = append(rows, fmt.Sprintf("%d: %s", a, strings.Join(row, " ")))
	}
	o.Figure, o.Unit = low/c.GBps, UnitOfLinkCeiling
	o.Bytes = int64(size) * int64(iters+1) * int64(len(all)*(len(all)-1))
	o.Detail = fmt.Sprintf("%d GPUs on %d host(s), %d B x %d: slowest pair %s %.3f GB/s = %.4f× the raw link ceiling %.3f GB/s (%s); "+
		"GB/s rows (source gpu_id: to each) %s; latency %.1f to %.1f µs",
		len(all), len(hosts), size, iters, lowAt, low, o.Figure, c.GBps, c.Detail, strings.Join(rows, "; "), minLat, maxLat)
	if len(o.Tests) > 0 {
		o.Detail += fmt.Sprintf("; hicart_test -p: %d peer tests", len(o.Tests))
	}
	if len(failed) > 0 {
		return o, fmt.Errorf("%s; not ok: %s", o.Detail, strings.Join(failed, "; "))
	}
	return o, nil
}

// hicartAllreduce runs hicart-allreduce over every GPU on the server's
// HiLink switch, f32 and bf16 from 4 B doubling to AllreduceMax, in
// every host that has some, and requires every size of both types with
// no wrong element in each. The figure is the server's bus bandwidth at
// the largest f32 size over the raw link ceiling measured right after.
func (g *sshGate) hicartAllreduce(ctx context.Context) (Outcome, error) {
	const minBytes = 4
	_, hosts := g.linkRun()
	maxBytes := g.o.AllreduceMax
	var ring []int
	for _, lh := range hosts {
		ring = append(ring, lh.ids...)
	}
	slices.Sort(ring)
	cmds := make([]string, len(hosts))
	for i := range hosts {
		cmds[i] = fmt.Sprintf("hicart-allreduce%s --min-bytes %d --max-bytes %d --dtype all --timeout %d",
			remoteOf(hosts, i), minBytes, maxBytes, linkToolTimeout)
	}
	outs, rcs, err := onAll(ctx, hosts, cmds, time.Duration(linkToolTimeout+60)*time.Second)
	for i, lh := range hosts {
		g.save("hicart_allreduce", lh.h.Name(), outs[i])
	}
	if err != nil {
		return Outcome{}, err
	}
	var srv *AllreduceReport
	for i, lh := range hosts {
		r, err := ParseAllreduce(outs[i])
		if err != nil {
			return Outcome{}, fmt.Errorf("%s (exit %d): %w", lh.h.Name(), rcs[i], err)
		}
		if err := CheckAllreduce(r, ring, minBytes, int64(maxBytes)); err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", lh.h.Name(), err)
		}
		if rcs[i] != 0 {
			return Outcome{}, fmt.Errorf("%s: hicart-allreduce exited %d with every element right", lh.h.Name(), rcs[i])
		}
		if i == 0 {
			srv = r
		}
	}
	c, err := g.ceiling(ctx)
	if err != nil {
		return Outcome{}, err
	}
	last := func(t string) AllreduceRow {
		var row AllreduceRow
		for _, x := range srv.Rows {
			if x.Type == t {
				row = x
			}
		}
		return row
	}
	f, b := last("float"), last("bf16")
	return Outcome{Figure: f.BusBW / c.GBps, Unit: UnitOfLinkCeiling, Bytes: 2 * f.Bytes * int64(len(ring)-1),
		Detail: fmt.Sprintf("ring of gpu_ids %v over %d host(s), %d sizes of f32 and bf16 from %d B to %d B, 0 wrong elements; "+
			"at %d B: f32 busbw %.4f GB/s (algbw %.4f, %.1f µs) = %.4f× the raw link ceiling %.3f GB/s (%s), bf16 busbw %.4f GB/s",
			ring, len(hosts), len(srv.Rows)/2, minBytes, maxBytes, f.Bytes, f.BusBW, f.AlgBW, f.TimeUs, f.BusBW/c.GBps, c.GBps, c.Detail, b.BusBW)}, nil
}
