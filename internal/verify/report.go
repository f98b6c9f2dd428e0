// Package verify is HiNIC's end-to-end gate: it runs named cases (the
// equivalents of the ibv_*_pingpong tools and perftest in the embedded
// rack, on RoCEv2 and native InfiniBand; the stock tools over SSH in VM
// racks) and collects their results in one Report format, printed as a
// table, JSON or JUnit XML.
//
// verify may import the engines and the rack harness; nothing imports it
// but the CLI.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jstemmer/go-junit-report/v2/junit"
)

// Result is the outcome of one case.
type Result string

// Outcomes.
const (
	Pass        Result = "pass"
	Fail        Result = "fail"
	Unsupported Result = "unsupported"
)

// ErrUnsupported is returned (wrapped) by a case the target cannot run; the
// case is reported "unsupported", which does not fail the gate.
var ErrUnsupported = errors.New("unsupported")

// CaseResult is one line of a report. Figure and Unit carry the case's
// headline measurement (for example MiB/s, or µs for a latency).
type CaseResult struct {
	Case     string  `json:"case"`
	Result   Result  `json:"result"`
	Figure   float64 `json:"figure"`
	Unit     string  `json:"unit"`
	Detail   string  `json:"detail"`
	Duration float64 `json:"duration_s"`
	// Tests are the tests of a case that runs a test suite (pyverbs),
	// and SkipReasons its skips grouped by reason.
	Tests       []TestResult  `json:"tests,omitempty"`
	SkipReasons []ReasonCount `json:"skip_reasons,omitempty"`
	// Bytes is the payload the case moved across the fabric, when it
	// counts one (perftest and pingpong cases).
	Bytes int64 `json:"bytes,omitempty"`
	// CPU is the host CPU time, in seconds, that each process of the
	// rack spent during the case (RunMetered): "fabric", "backend",
	// "qemu:<guest>".
	CPU map[string]float64 `json:"cpu_s,omitempty"`
	// CPUPerGiB is the rack's whole CPU time of the case per GiB of
	// Bytes, and CPUPerGiBBy the same for each process.
	CPUPerGiB   float64            `json:"cpu_s_per_gib,omitempty"`
	CPUPerGiBBy map[string]float64 `json:"cpu_s_per_gib_by,omitempty"`
}

// CPUTotal is the sum of CPU over the rack's processes.
func (c CaseResult) CPUTotal() float64 {
	t := 0.0
	for _, v := range c.CPU {
		t += v
	}
	return t
}

// Report is the outcome of a gate run.
type Report struct {
	Target   string       `json:"target"`
	Started  time.Time    `json:"started"`
	Duration float64      `json:"duration_s"`
	Cases    []CaseResult `json:"cases"`
}

// Failed reports whether any case failed.
func (r *Report) Failed() bool {
	for _, c := range r.Cases {
		if c.Result == Fail {
			return true
		}
	}
	return false
}

// Counts returns how many cases passed, failed and were unsupported.
func (r *Report) Counts() (pass, fail, unsupported int) {
	for _, c := range r.Cases {
		switch c.Result {
		case Pass:
			pass++
		case Fail:
			fail++
		case Unsupported:
			unsupported++
		}
	}
	return
}

// Outcome is what a case function returns when it ran to the end.
type Outcome struct {
	Figure float64
	Unit   string
	Detail string
	Tests  []TestResult // a suite's tests, each with its result
	Bytes  int64        // payload moved across the fabric, 0 when not counted
}

// CPUMeter returns the CPU seconds that each process of a rack has used
// so far, by name. RunMetered calls it before and after each case.
type CPUMeter func() map[string]float64

// Case is one named check.
type Case struct {
	Name string
	Run  func(ctx context.Context) (Outcome, error)
}

// Progress receives a line as each case starts and ends; nil discards.
type Progress func(format string, a ...any)

// Run runs cases in order and returns their report. A case that returns an
// error fails (or is unsupported, for ErrUnsupported); a cancelled context
// stops the run after the current case, which then fails with the context's
// error.
func Run(ctx context.Context, target string, cases []Case, progress Progress) *Report {
	return RunMetered(ctx, target, cases, progress, nil)
}

// RunMetered is Run that also records, with meter (nil: none), each
// case's host CPU time per process and, for a case that moved Bytes, its
// CPU seconds per GiB.
func RunMetered(ctx context.Context, target string, cases []Case, progress Progress, meter CPUMeter) *Report {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	rep := &Report{Target: target, Started: time.Now()}
	for i, c := range cases {
		if ctx.Err() != nil {
			rep.Cases = append(rep.Cases, CaseResult{Case: c.Name, Result: Fail, Detail: "not run: " + ctx.Err().Error()})
			continue
		}
		progress("[%d/%d] %s ...", i+1, len(cases), c.Name)
		var before map[string]float64
		if meter != nil {
			before = meter()
		}
		start := time.Now()
		out, err := c.Run(ctx)
		cr := CaseResult{Case: c.Name, Result: Pass, Figure: out.Figure, Unit: out.Unit, Detail: out.Detail,
			Duration: time.Since(start).Seconds(), Tests: out.Tests, Bytes: out.Bytes}
		if meter != nil {
			cr.setCPU(before, meter())
		}
		if len(out.Tests) > 0 {
			cr.SkipReasons = (&PyverbsRun{Tests: out.Tests}).Reasons(TestSkip)
		}
		switch {
		case errors.Is(err, ErrUnsupported):
			cr.Result, cr.Detail = Unsupported, err.Error()
		case err != nil:
			cr.Result, cr.Detail = Fail, err.Error()
		}
		progress("[%d/%d] %s: %s %s", i+1, len(cases), c.Name, cr.Result, FormatFigure(cr.Figure, cr.Unit))
		rep.Cases = append(rep.Cases, cr)
	}
	rep.Duration = time.Since(rep.Started).Seconds()
	return rep
}

// setCPU records the CPU each process used between two meter readings
// (a process missing from either reading, started or gone meanwhile, is
// left out) and, when the case moved bytes, the CPU per GiB.
func (c *CaseResult) setCPU(before, after map[string]float64) {
	for name, a := range after {
		b, ok := before[name]
		if !ok || a < b {
			continue
		}
		if c.CPU == nil {
			c.CPU = map[string]float64{}
		}
		c.CPU[name] = a - b
	}
	if c.Bytes <= 0 || c.CPU == nil {
		return
	}
	gib := float64(c.Bytes) / (1 << 30)
	c.CPUPerGiB = c.CPUTotal() / gib
	c.CPUPerGiBBy = map[string]float64{}
	for name, v := range c.CPU {
		c.CPUPerGiBBy[name] = v / gib
	}
}

// FormatFigure renders a figure with its unit, or "" when there is none.
func FormatFigure(v float64, unit string) string {
	if unit == "" {
		return ""
	}
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " " + unit
}

// WriteJUnit writes the report as JUnit XML: one suite named after the
// target, one test case per case; unsupported cases are skipped.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junit.Testsuite{Name: "hinic verify " + r.Target, Time: seconds(r.Duration)}
	suite.SetTimestamp(r.Started)
	for _, c := range r.Cases {
		tc := junit.Testcase{Name: c.Case, Classname: "hinic.verify." + r.Target, Time: seconds(c.Duration)}
		msg := c.Detail
		if f := FormatFigure(c.Figure, c.Unit); f != "" {
			tc.SystemOut = &junit.Output{Data: f}
		}
		switch c.Result {
		case Fail:
			tc.Failure = &junit.Result{Message: msg}
		case Unsupported:
			tc.Skipped = &junit.Result{Message: msg}
		}
		suite.AddTestcase(tc)
	}
	var all junit.Testsuites
	all.AddSuite(suite)
	if err := all.WriteXML(w); err != nil {
		return fmt.Errorf("verify: write JUnit: %w", err)
	}
	return nil
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
