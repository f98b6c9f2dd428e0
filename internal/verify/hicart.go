package verify

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The GPU cases of the SSH gate: the HiGPU tools (hicart-tools) in the
// server host, against the GPUs its rack spec gives it (docs/verify.md,
// "The GPU cases"). They are listed only when the spec gives the
// server GPUs (SSHOptions.GPUs).

// GPU is one GPU the rack spec gives the server host.
type GPU struct {
	ID        int // gpu_id: /dev/higpu<ID>
	MemoryMiB int // device memory
	// HiLink is the HiLink switch the spec cables it to; "" for none.
	HiLink string
}

// UnitOfMemcpy is the unit of hicart_bandwidth's figure: a copy rate as
// a multiple of the host memcpy rate measured in the same run.
const UnitOfMemcpy = "× memcpy"

// Bounds of the tools' output the parsers accept: a guest is untrusted.
const (
	maxToolOutput = 4 << 20 // bytes of one tool's output parsed
	maxTAPTests   = 1 << 16 // test lines of one TAP stream
)

// hicartTestTimeout bounds one hicart_test run: it checks every kernel
// bit for bit against a CPU reference, slow under TCG.
const hicartTestTimeout = 10 * time.Minute

// SMIGPU is one GPU of `hicart-smi --json`.
type SMIGPU struct {
	Ordinal     int     `json:"ordinal"`
	GPUID       int     `json:"gpu_id"`
	Name        string  `json:"name"`
	Device      string  `json:"device"`
	ABI         string  `json:"abi"`
	HiLinkPorts int     `json:"hilink_ports"`
	Utilization float64 `json:"utilization"`
	Contexts    int     `json:"contexts"`
	Inflight    int     `json:"inflight"`
	Memory      struct {
		Total       uint64 `json:"total"`
		Budget      uint64 `json:"budget"`
		Used        uint64 `json:"used"`
		LargestFree uint64 `json:"largest_free"`
		Allocations uint32 `json:"allocations"`
	} `json:"memory"`
}

// SMIReport is `hicart-smi --json`.
type SMIReport struct {
	DriverUAPI int      `json:"driver_uapi"`
	GPUs       []SMIGPU `json:"gpus"`
}

// jsonLine returns the last line of out that holds a JSON object: the
// tools print one, and the shell may add stderr lines around it.
func jsonLine(out string) (string, error) {
	if len(out) > maxToolOutput {
		return "", fmt.Errorf("output of %d bytes, more than %d", len(out), maxToolOutput)
	}
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "{") {
			return l, nil
		}
	}
	return "", fmt.Errorf("no JSON object in the output: %s", lastLine(out))
}

// decodeJSONLine decodes the JSON object a tool printed (jsonLine) into
// a T; errors name the tool.
func decodeJSONLine[T any](tool, out string) (*T, error) {
	l, err := jsonLine(out)
	if err != nil {
		return nil, err
	}
	var r T
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	return &r, nil
}

// ParseHicartSMI reads `hicart-smi --json`: ordinals 0..n-1 in order,
// gpu_ids unique in 0..7, device memory used within its total.
func ParseHicartSMI(out string) (*SMIReport, error) {
	r, err := decodeJSONLine[SMIReport]("hicart-smi --json", out)
	if err != nil {
		return nil, err
	}
	if r.GPUs == nil {
		return nil, errors.New("hicart-smi --json: no gpus list")
	}
	seen := map[int]bool{}
	for i, g := range r.GPUs {
		switch {
		case g.Ordinal != i:
			return nil, fmt.Errorf("hicart-smi: GPU %d has ordinal %d", i, g.Ordinal)
		case g.GPUID < 0 || g.GPUID > 7 || seen[g.GPUID]:
			return nil, fmt.Errorf("hicart-smi: ordinal %d: gpu_id %d out of 0..7 or listed twice", i, g.GPUID)
		case g.Memory.Total == 0 || g.Memory.Used > g.Memory.Total:
			return nil, fmt.Errorf("hicart-smi: gpu_id %d: %d bytes used of %d", g.GPUID, g.Memory.Used, g.Memory.Total)
		case math.IsNaN(g.Utilization) || g.Utilization < 0 || g.Utilization > 100:
			return nil, fmt.Errorf("hicart-smi: gpu_id %d: utilization %v", g.GPUID, g.Utilization)
		}
		seen[g.GPUID] = true
	}
	return r, nil
}

// CheckSMI compares hicart-smi's GPUs with the spec's: the same gpu_ids,
// each with the spec's device memory. It returns the gpu_id of each
// ordinal.
func CheckSMI(r *SMIReport, want []GPU) ([]int, error) {
	byID := map[int]SMIGPU{}
	var ids []int
	for _, g := range r.GPUs {
		byID[g.GPUID] = g
		ids = append(ids, g.GPUID)
	}
	var missing []string
	for _, w := range want {
		g, ok := byID[w.ID]
		if !ok {
			missing = append(missing, fmt.Sprint(w.ID))
			continue
		}
		if got := g.Memory.Total; got != uint64(w.MemoryMiB)<<20 {
			return ids, fmt.Errorf("gpu_id %d: %d bytes of device memory, the spec gives %d MiB", w.ID, got, w.MemoryMiB)
		}
	}
	if len(missing) > 0 || len(r.GPUs) != len(want) {
		return ids, fmt.Errorf("hicart-smi lists gpu_ids %v, the spec gives %d GPUs (missing: %s)",
			ids, len(want), strings.Join(missing, ", "))
	}
	return ids, nil
}

// HicartBW is `hicart-bandwidth --json`: copy rates in GB/s (10^9
// bytes per second) and each as a ratio to the host memcpy.
type HicartBW struct {
	Device     int    `json:"device"`
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Iters      int    `json:"iters"`
	HostMemory string `json:"host_memory"`
	GBps       struct {
		Memcpy float64 `json:"host_memcpy"`
		H2D    float64 `json:"h2d"`
		D2H    float64 `json:"d2h"`
		D2D    float64 `json:"d2d"`
	} `json:"gbps"`
	Ratio struct {
		H2D float64 `json:"h2d"`
		D2H float64 `json:"d2h"`
		D2D float64 `json:"d2d"`
	} `json:"ratio"`
}

// Lowest returns the lowest of the three ratios and its direction.
func (b HicartBW) Lowest() (float64, string) {
	r, dir := b.Ratio.H2D, "H2D"
	if b.Ratio.D2H < r {
		r, dir = b.Ratio.D2H, "D2H"
	}
	if b.Ratio.D2D < r {
		r, dir = b.Ratio.D2D, "D2D"
	}
	return r, dir
}

// gibps converts GB/s to GiB/s.
func gibps(gbps float64) float64 { return gbps * 1e9 / (1 << 30) }

// ParseHicartBandwidth reads `hicart-bandwidth --json`. Every rate and
// ratio must be finite and not negative, the memcpy ceiling positive
// (a ceiling of 0 prints "inf" ratios, which is not JSON).
func ParseHicartBandwidth(out string) (HicartBW, error) {
	var b HicartBW
	p, err := decodeJSONLine[HicartBW]("hicart-bandwidth --json", out)
	if err != nil {
		return b, err
	}
	b = *p
	if b.Size <= 0 || b.Iters <= 0 {
		return b, fmt.Errorf("hicart-bandwidth: size %d, iters %d", b.Size, b.Iters)
	}
	for _, v := range []float64{b.GBps.Memcpy, b.GBps.H2D, b.GBps.D2H, b.GBps.D2D, b.Ratio.H2D, b.Ratio.D2H, b.Ratio.D2D} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return b, fmt.Errorf("hicart-bandwidth: a rate or ratio is %v", v)
		}
	}
	if b.GBps.Memcpy == 0 {
		return b, errors.New("hicart-bandwidth: no host memcpy ceiling")
	}
	return b, nil
}

// TAPRun is a parsed TAP stream (the Test Anything Protocol, version
// 12, as hicart_test prints it).
type TAPRun struct {
	Planned                 int // the plan's N, "1..N"
	Passed, Failed, Skipped int
	// SkipAll is the reason of a plan "1..0 # SKIP reason".
	SkipAll string
	Tests   []TestResult
}

var (
	tapPlan = regexp.MustCompile(`^1\.\.(\d+)\s*(?:#\s*(?i:skip)\S*\s*(.*))?$`)
	tapTest = regexp.MustCompile(`^(not )?ok\b\s*(\d+)?\s*(?:-\s*)?([^#]*?)\s*(?:#\s*(\S+)\s*(.*))?$`)
)

// toolLines returns a scanner over the lines of a tool's output, or an
// error naming tool when the output is larger than the parsers take.
// A line may be up to 1 MiB.
func toolLines(tool, out string) (*bufio.Scanner, error) {
	if len(out) > maxToolOutput {
		return nil, fmt.Errorf("%s: output of %d bytes, more than %d", tool, len(out), maxToolOutput)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return sc, nil
}

// ParseTAP reads a TAP stream: one plan, first or last; test lines
// "ok N - description" and "not ok N - ...", numbered in order, with
// the SKIP and TODO directives (a TODO test that fails is an expected
// failure, one that passes an unexpected success); "#" lines are
// diagnostics. It fails when the plan is missing, given twice, or does
// not match the tests (the program died), and on "Bail out!".
func ParseTAP(out string) (*TAPRun, error) {
	sc, err := toolLines("TAP", out)
	if err != nil {
		return nil, err
	}
	r := &TAPRun{Planned: -1}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "Bail out!"):
			return r, fmt.Errorf("TAP: %s", line)
		case strings.HasPrefix(line, "#"):
			continue
		}
		if m := tapPlan.FindStringSubmatch(line); m != nil {
			if r.Planned >= 0 {
				return r, fmt.Errorf("TAP: a second plan %q", line)
			}
			n, err := strconv.Atoi(m[1])
			if err != nil || n > maxTAPTests {
				return r, fmt.Errorf("TAP: plan %q", line)
			}
			r.Planned = n
			if n == 0 {
				r.SkipAll = strings.TrimSpace(m[2])
			}
			continue
		}
		m := tapTest.FindStringSubmatch(line)
		if m == nil {
			continue // a test's own output
		}
		if len(r.Tests) == maxTAPTests {
			return r, fmt.Errorf("TAP: more than %d tests", maxTAPTests)
		}
		num := len(r.Tests) + 1
		if m[2] != "" {
			if n, err := strconv.Atoi(m[2]); err != nil || n != num {
				return r, fmt.Errorf("TAP: test %s where %d comes next", m[2], num)
			}
		}
		t := TestResult{Name: strings.TrimSpace(fmt.Sprintf("%d %s", num, m[3])), Result: TestOK}
		notOK := m[1] != ""
		if notOK {
			t.Result = TestFail
		}
		switch strings.ToUpper(m[4]) {
		case "SKIP", "SKIPPED":
			t.Result, t.Reason = TestSkip, strings.TrimSpace(m[5])
		case "TODO":
			t.Result, t.Reason = TestXPass, strings.TrimSpace(m[5])
			if notOK {
				t.Result = TestXFail
			}
		}
		switch t.Result {
		case TestOK, TestXPass:
			r.Passed++
		case TestFail:
			r.Failed++
		case TestSkip:
			r.Skipped++
		}
		r.Tests = append(r.Tests, t)
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("TAP: %w", err)
	}
	switch {
	case r.Planned < 0:
		return r, fmt.Errorf("TAP: no plan (the program did not finish): %s", lastLine(out))
	case r.Planned != len(r.Tests):
		return r, fmt.Errorf("TAP: plan 1..%d, %d tests ran (the program did not finish)", r.Planned, len(r.Tests))
	}
	return r, nil
}

// gpuCases are the GPU cases, when the spec gives the server GPUs.
func (g *sshGate) gpuCases() []Case {
	if len(g.o.GPUs) == 0 {
		return nil
	}
	return []Case{
		{Name: "hicart_smi", Run: g.hicartSMI},
		{Name: "hicart_test", Run: g.hicartTest},
		{Name: "hicart_bandwidth", Run: g.hicartBandwidth},
	}
}

// exitMarker follows a tool's output with its exit status, so that the
// output of a failing tool is parsed too.
const exitMarker = "HINIC-EXIT"

var exitLine = regexp.MustCompile(`(?m)^` + exitMarker + ` (\d+)\s*$`)

// runStatus runs cmd on h under timeout and returns its output and exit
// status.
func runStatus(ctx context.Context, h Host, cmd string, timeout time.Duration) (string, int, error) {
	out, err := h.Run(ctx, fmt.Sprintf("timeout -s KILL %d %s 2>&1; echo %s $?", int(timeout.Seconds()), cmd, exitMarker))
	if err != nil {
		return out, -1, err
	}
	m := exitLine.FindAllStringSubmatch(out, -1)
	if m == nil {
		return out, -1, fmt.Errorf("no exit status after the output: %s", lastLine(out))
	}
	rc, _ := strconv.Atoi(m[len(m)-1][1])
	return out, rc, nil
}

// hicartSMI lists the server's GPUs with hicart-smi and checks them
// against the spec.
func (g *sshGate) hicartSMI(ctx context.Context) (Outcome, error) {
	h := g.srv
	out, err := h.Run(ctx, "hicart-smi --json")
	g.save("hicart_smi", h.Name(), out)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: hicart-smi --json: %w: %s", h.Name(), err, lastLine(out))
	}
	r, err := ParseHicartSMI(out)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
	}
	if _, err := CheckSMI(r, g.o.GPUs); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", h.Name(), err)
	}
	var parts []string
	for _, x := range r.GPUs {
		parts = append(parts, fmt.Sprintf("gpu_id %d %s %d MiB (%s, ABI %s)", x.GPUID, x.Name, x.Memory.Total>>20, x.Device, x.ABI))
	}
	return Outcome{Figure: float64(len(r.GPUs)), Unit: "GPUs",
		Detail: fmt.Sprintf("%s: %s; driver UAPI %d", h.Name(), strings.Join(parts, "; "), r.DriverUAPI)}, nil
}

// hicartTest runs hicart_test on every GPU of the server, one device
// ordinal after the other, and fails on any test that is not ok.
func (g *sshGate) hicartTest(ctx context.Context) (Outcome, error) {
	h := g.srv
	var o Outcome
	var details, failed []string
	passed := 0
	for ord := range g.o.GPUs {
		out, rc, err := runStatus(ctx, h, fmt.Sprintf("hicart_test -d %d", ord), hicartTestTimeout)
		g.save(fmt.Sprintf("hicart_test.%d", ord), h.Name(), out)
		if err != nil {
			return o, fmt.Errorf("%s: hicart_test -d %d: %w", h.Name(), ord, err)
		}
		r, perr := ParseTAP(out)
		if rc == 77 || (perr == nil && r.Planned == 0) {
			return o, fmt.Errorf("%s: hicart_test -d %d: no HiGPU device, though the spec gives %d GPUs: %s",
				h.Name(), ord, len(g.o.GPUs), lastLine(strings.TrimSpace(exitLine.ReplaceAllString(out, ""))))
		}
		if perr != nil {
			return o, fmt.Errorf("%s: hicart_test -d %d (exit %d): %w", h.Name(), ord, rc, perr)
		}
		for _, t := range r.Tests {
			t.Name = fmt.Sprintf("device %d: %s", ord, t.Name)
			o.Tests = append(o.Tests, t)
			if t.Result == TestFail {
				failed = append(failed, t.Name)
			}
		}
		passed += r.Passed
		details = append(details, fmt.Sprintf("device %d: %d passed, %d failed, %d skipped of %d", ord, r.Passed, r.Failed, r.Skipped, r.Planned))
		if rc != 0 && r.Failed == 0 {
			failed = append(failed, fmt.Sprintf("device %d: exit %d with every test ok", ord, rc))
		}
	}
	o.Figure, o.Unit = float64(passed), "tests passed"
	o.Detail = h.Name() + ": " + strings.Join(details, "; ")
	if len(failed) > 0 {
		return o, fmt.Errorf("%s; not ok: %s", o.Detail, strings.Join(failed, "; "))
	}
	return o, nil
}

// GPU bandwidth run: small enough for a TCG guest, whose memcpy moves
// hundreds of MB/s.
const (
	gpuBWSize  = 8 << 20
	gpuBWIters = 10
)

// hicartBandwidth runs hicart-bandwidth on every GPU of the server. The
// figure is the lowest of the H2D, D2H and D2D rates as a multiple of
// the host memcpy ceiling the tool measured in the same run: the copy
// path furthest from what the guest's own memory can do.
func (g *sshGate) hicartBandwidth(ctx context.Context) (Outcome, error) {
	h := g.srv
	low, lowAt := math.Inf(1), ""
	var details []string
	for ord := range g.o.GPUs {
		cmd := fmt.Sprintf("timeout -s KILL %d hicart-bandwidth --device %d --size %d --iters %d --json",
			int(g.o.Timeout.Seconds()), ord, gpuBWSize, gpuBWIters)
		out, err := h.Run(ctx, cmd)
		g.save(fmt.Sprintf("hicart_bandwidth.%d", ord), h.Name(), out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: hicart-bandwidth --device %d: %w: %s", h.Name(), ord, err, lastLine(out))
		}
		b, err := ParseHicartBandwidth(out)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: device %d: %w", h.Name(), ord, err)
		}
		if r, dir := b.Lowest(); r < low {
			low, lowAt = r, fmt.Sprintf("%s of gpu_id %d", dir, b.Device)
		}
		details = append(details, fmt.Sprintf("gpu_id %d (%d MiB x %d, %s): H2D %.3f GiB/s (%.3f×), D2H %.3f GiB/s (%.3f×), D2D %.3f GiB/s (%.3f×), host memcpy %.3f GiB/s",
			b.Device, b.Size>>20, b.Iters, b.HostMemory, gibps(b.GBps.H2D), b.Ratio.H2D, gibps(b.GBps.D2H), b.Ratio.D2H,
			gibps(b.GBps.D2D), b.Ratio.D2D, gibps(b.GBps.Memcpy)))
	}
	return Outcome{Figure: low, Unit: UnitOfMemcpy,
		Detail: fmt.Sprintf("%s: lowest %s; %s", h.Name(), lowAt, strings.Join(details, "; "))}, nil
}
