package verify

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rdma-core's own test suite (tests/ of rdma-core, shipped by Debian's
// python3-pyverbs under /usr/share/doc/rdma-core/tests) run against one
// guest's device: the conformance case of the SSH gate.

// TestResult is one test of a suite run.
type TestResult struct {
	Name   string `json:"name"`   // e.g. tests.test_cq.CQTest.test_create_cq
	Result string `json:"result"` // ok, fail, error, skip, xfail, xpass
	Reason string `json:"reason,omitempty"`
}

// Results of TestResult.
const (
	TestOK    = "ok"
	TestFail  = "fail"
	TestError = "error"
	TestSkip  = "skip"
	TestXFail = "xfail" // expected failure
	TestXPass = "xpass" // unexpected success
)

// PyverbsRun is a parsed `python3 tests/run_tests.py -v` output.
type PyverbsRun struct {
	Ran                             int // "Ran N tests"
	Passed, Failed, Errors, Skipped int
	Tests                           []TestResult
	Seconds                         float64
}

// ReasonCount is how many tests gave one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Reasons groups the tests of one result by reason, most frequent first.
func (r *PyverbsRun) Reasons(result string) []ReasonCount {
	by := map[string]int{}
	for _, t := range r.Tests {
		if t.Result == result {
			by[t.Reason]++
		}
	}
	out := make([]ReasonCount, 0, len(by))
	for k, v := range by {
		out = append(out, ReasonCount{k, v})
	}
	slices.SortFunc(out, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Reason, b.Reason))
	})
	return out
}

// unittest's verbose lines: "test_x (tests.mod.Class.test_x) ... ok", the
// " ... RESULT" possibly on the next line after the docstring's first
// line; then, per failure or error, a block "ERROR: test_x (id)" with its
// traceback; then "Ran N tests in Xs" and "OK (skipped=K)" or "FAILED
// (failures=a, errors=b, skipped=c)".
var (
	pvTestLine  = regexp.MustCompile(`^(test\w*) \(([\w.]+)\)(.*)$`)
	pvBlockLine = regexp.MustCompile(`^(ERROR|FAIL): (test\w*) \(([\w.]+)\)`)
	pvRan       = regexp.MustCompile(`^Ran (\d+) tests? in ([\d.]+)s$`)
	pvSummary   = regexp.MustCompile(`^(OK|FAILED)(?: \((.*)\))?$`)
	pvSkipped   = regexp.MustCompile(`^skipped ['"](.*)['"]$`)
)

// ParsePyverbs reads a verbose unittest run of rdma-core's suite. It
// fails when the run did not end with unittest's summary (the suite did
// not load, or was killed) or when the summary and the listed tests
// disagree.
func ParsePyverbs(out string) (*PyverbsRun, error) {
	r := &PyverbsRun{}
	index := map[string]int{} // test id -> r.Tests index
	var pending string        // a test whose result line has not come yet
	dots := false             // its " ... " has come
	inBlocks, summary := false, false
	var block string // the test of the failure block being read
	var last string  // its last traceback line
	endBlock := func() {
		if block != "" && last != "" {
			if i, ok := index[block]; ok && r.Tests[i].Reason == "" {
				r.Tests[i].Reason = last
			}
		}
		block, last = "", ""
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := pvRan.FindStringSubmatch(line); m != nil {
			endBlock()
			r.Ran, _ = strconv.Atoi(m[1])
			r.Seconds, _ = strconv.ParseFloat(m[2], 64)
			continue
		}
		if m := pvSummary.FindStringSubmatch(line); m != nil && r.Ran > 0 {
			summary = true
			for _, kv := range strings.Split(m[2], ", ") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.Atoi(v)
				switch k {
				case "failures":
					r.Failed = n
				case "errors":
					r.Errors = n
				case "skipped":
					r.Skipped = n
				}
			}
			continue
		}
		if strings.HasPrefix(line, "======") {
			endBlock()
			inBlocks = true
			continue
		}
		if inBlocks {
			if m := pvBlockLine.FindStringSubmatch(line); m != nil && block == "" {
				block = m[3]
				continue
			}
			if t := strings.TrimSpace(line); t != "" && block != "" && !strings.HasPrefix(t, "------") &&
				!strings.HasPrefix(line, " ") && !strings.HasPrefix(t, "Traceback") {
				last = t
			}
			continue
		}
		text := line
		if m := pvTestLine.FindStringSubmatch(line); m != nil {
			pending, text, dots = m[2], m[3], false
		}
		if pending == "" {
			continue
		}
		var res string
		if i := strings.LastIndex(text, " ... "); i >= 0 {
			res, dots = strings.TrimSpace(text[i+5:]), true
		} else if dots {
			// What the test printed came after the " ... ", and
			// unittest's word follows on a line of its own.
			res = strings.TrimSpace(text)
		} else {
			continue // the docstring's line comes first
		}
		t := TestResult{Name: pending}
		switch {
		case res == "ok":
			t.Result = TestOK
		case res == "FAIL":
			t.Result = TestFail
		case res == "ERROR":
			t.Result = TestError
		case res == "expected failure":
			t.Result = TestXFail
		case res == "unexpected success":
			t.Result = TestXPass
		case pvSkipped.MatchString(res):
			t.Result, t.Reason = TestSkip, pvSkipped.FindStringSubmatch(res)[1]
		default:
			continue // the test's own output
		}
		index[pending] = len(r.Tests)
		r.Tests = append(r.Tests, t)
		pending = ""
	}
	endBlock()
	if r.Ran == 0 || !summary {
		return r, fmt.Errorf("the suite did not finish (no unittest summary): %s", lastLine(out))
	}
	counts := map[string]int{}
	for _, t := range r.Tests {
		counts[t.Result]++
	}
	r.Passed = counts[TestOK]
	if len(r.Tests) != r.Ran || counts[TestFail] != r.Failed || counts[TestError] != r.Errors || counts[TestSkip] != r.Skipped {
		return r, fmt.Errorf("unittest ran %d tests (%d failures, %d errors, %d skipped) but %d are listed (%d failed, %d errors, %d skipped)",
			r.Ran, r.Failed, r.Errors, r.Skipped, len(r.Tests), counts[TestFail], counts[TestError], counts[TestSkip])
	}
	return r, nil
}

// pyverbsTimeout bounds the suite: 273 tests take about 12 s on Soft-RoCE
// in a TCG guest; traffic tests that hang end at their own timeouts.
const pyverbsTimeout = 10 * time.Minute

// pyverbsHugePages is how many 2 MiB pages the case reserves in the guest
// for the suite's huge-page tests (a parent domain's allocator over one
// huge page; ODP's, which skip without ODP): 16 MiB, given back after.
const pyverbsHugePages = 8

// pyverbs runs rdma-core's suite on the server host's device: copied out
// of /usr/share/doc (where the package gzips some of its modules and the
// suite cannot run in place), with the device and the GID index the
// ibv_devinfo case chose (0 on InfiniBand). HiNIC's run fails on any
// failure or error; a baseline NIC's (Soft-RoCE) failures are its own and
// only reported.
func (g *sshGate) pyverbs(ctx context.Context) (Outcome, error) {
	h := g.srv
	gid := 0
	if !g.ib {
		if g.gidSrv < 0 {
			return Outcome{}, fmt.Errorf("no RoCEv2 GID: the ibv_devinfo case did not pass")
		}
		gid = g.gidSrv
	}
	cmd := fmt.Sprintf(`set -e
test -d /usr/share/doc/rdma-core/tests || { echo "no /usr/share/doc/rdma-core/tests: install python3-pyverbs"; exit 2; }
d=$(mktemp -d /tmp/hinic-pyverbs.XXXXXX)
# The suite's huge-page tests want 2 MiB pages reserved: %d for the run,
# then the reservation the guest had.
hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
hp_old=$(cat "$hp" 2>/dev/null || echo)
trap 'rm -rf "$d"; [ -z "$hp_old" ] || echo "$hp_old" > "$hp" 2>/dev/null || true' EXIT
if [ -n "$hp_old" ] && [ "$hp_old" -lt %d ]; then
	echo %d > "$hp" 2>/dev/null || echo "hinic: could not reserve 2 MiB huge pages"
fi
cp -r /usr/share/doc/rdma-core/tests "$d/"
cd "$d/tests" && for f in *.gz; do [ -e "$f" ] && gunzip -f "$f"; done
cd "$d"
rc=0
timeout -s KILL %d python3 tests/run_tests.py --dev %s --gid %d -v 2>&1 || rc=$?
echo "HINIC-SUITE-EXIT $rc"`, pyverbsHugePages, pyverbsHugePages, pyverbsHugePages,
		int(pyverbsTimeout.Seconds()), h.Device(), gid)
	rctx, cancel := context.WithTimeout(ctx, pyverbsTimeout+time.Minute)
	defer cancel()
	out, err := h.Run(rctx, cmd)
	g.save("pyverbs", h.Name(), out)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w: %s", h.Name(), err, lastLine(out))
	}
	run, perr := ParsePyverbs(out)
	if perr != nil {
		return Outcome{}, fmt.Errorf("%s: %w", h.Name(), perr)
	}
	detail := fmt.Sprintf("%s on %s: %d passed, %d failed, %d errors, %d skipped of %d in %.1f s",
		h.Device(), h.Name(), run.Passed, run.Failed, run.Errors, run.Skipped, run.Ran, run.Seconds)
	for _, res := range []string{TestFail, TestError} {
		for _, t := range run.Tests {
			if t.Result == res {
				detail += fmt.Sprintf("; %s %s: %s", strings.ToUpper(res), t.Name, t.Reason)
			}
		}
	}
	if rs := run.Reasons(TestSkip); len(rs) > 0 {
		var parts []string
		for _, rc := range rs {
			parts = append(parts, fmt.Sprintf("%d× %s", rc.Count, rc.Reason))
		}
		detail += "; skips: " + strings.Join(parts, ", ")
	}
	o := Outcome{Figure: float64(run.Passed), Unit: "tests passed", Detail: detail, Tests: run.Tests}
	if h.NIC() == "hicain" && run.Failed+run.Errors > 0 {
		return o, fmt.Errorf("%s", detail)
	}
	return o, nil
}
