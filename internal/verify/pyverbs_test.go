package verify

import (
	"context"
	"os"
	"strings"
	"testing"
)

// pyverbsOK is the verbose output of a run with every kind of result,
// in unittest's format (Python 3.11): a docstring line before " ... ",
// skips with reasons, a failure and an error with their blocks.
const pyverbsOK = `test_create_cq (tests.test_cq.CQTest.test_create_cq)
Test ibv_create_cq() ... ok
test_cq_events (tests.test_cq_events.CqEventsTestCase.test_cq_events) ... ok
test_qp_ex_rc_atomic_write (tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write) ... ERROR
test_qp_ex_rc_bind_mw (tests.test_qpex.QpExTestCase.test_qp_ex_rc_bind_mw) ... skipped 'Extended QP is not supported'
test_qp_ex_ud_send (tests.test_qpex.QpExTestCase.test_qp_ex_ud_send) ... skipped 'Extended QP is not supported'
test_mr_rereg (tests.test_mr.MRTest.test_mr_rereg)
Test rereg of an MR ... skipped "Rereg MR is not supported"
test_odp (tests.test_odp.OdpTestCase.test_odp) ... FAIL
test_x (tests.test_x.X.test_x) ... expected failure
test_rdmacm_fork (tests.test_rdmacm.CMTestCase.test_rdmacm_fork) ... is_fork_initialized() = 2
ok

======================================================================
ERROR: test_qp_ex_rc_atomic_write (tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/tmp/t/tests/test_qpex.py", line 300, in test_qp_ex_rc_atomic_write
    u.atomic_write_traffic(**self.traffic_args)
pyverbs.pyverbs_error.PyverbsRDMAError: Failed to post send. Errno: 95, Operation not supported

======================================================================
FAIL: test_odp (tests.test_odp.OdpTestCase.test_odp)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/tmp/t/tests/test_odp.py", line 10, in test_odp
    self.assertEqual(a, b)
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 9 tests in 1.234s

FAILED (failures=1, errors=1, skipped=3, expected failures=1)
`

func TestParsePyverbs(t *testing.T) {
	r, err := ParsePyverbs(pyverbsOK)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ran != 9 || r.Passed != 3 || r.Failed != 1 || r.Errors != 1 || r.Skipped != 3 || r.Seconds != 1.234 {
		t.Errorf("run %+v", r)
	}
	want := map[string]TestResult{
		"tests.test_cq.CQTest.test_create_cq": {Result: TestOK},
		"tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write": {Result: TestError,
			Reason: "pyverbs.pyverbs_error.PyverbsRDMAError: Failed to post send. Errno: 95, Operation not supported"},
		"tests.test_mr.MRTest.test_mr_rereg":              {Result: TestSkip, Reason: "Rereg MR is not supported"},
		"tests.test_odp.OdpTestCase.test_odp":             {Result: TestFail, Reason: "AssertionError: 1 != 2"},
		"tests.test_x.X.test_x":                           {Result: TestXFail},
		"tests.test_qpex.QpExTestCase.test_qp_ex_ud_send": {Result: TestSkip, Reason: "Extended QP is not supported"},
	}
	for _, tr := range r.Tests {
		if w, ok := want[tr.Name]; ok && (w.Result != tr.Result || w.Reason != tr.Reason) {
			t.Errorf("%s: %+v, want %+v", tr.Name, tr, w)
		}
	}
	rs := r.Reasons(TestSkip)
	if len(rs) != 2 || rs[0] != (ReasonCount{"Extended QP is not supported", 2}) || rs[1].Count != 1 {
		t.Errorf("skip reasons %+v", rs)
	}
}

// A real run of rdma-core 44's suite on a host with no RDMA device: 273
// tests, 269 errors in setUp and 4 skips (the failure blocks after the
// third are cut from the fixture).
func TestParsePyverbsRealOutput(t *testing.T) {
	b, err := os.ReadFile("testdata/pyverbs-nodevice.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParsePyverbs(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ran != 273 || r.Errors != 269 || r.Skipped != 4 || r.Passed != 0 {
		t.Errorf("run: ran %d, %d passed, %d errors, %d skipped", r.Ran, r.Passed, r.Errors, r.Skipped)
	}
	if got := r.Tests[0]; got.Name != "tests.test_addr.AHTest.test_create_ah" || got.Result != TestError ||
		got.Reason != "pyverbs.pyverbs_error.PyverbsRDMAError: Failed to get devices list" {
		t.Errorf("first test %+v", got)
	}
	if rs := r.Reasons(TestSkip); len(rs) != 2 || rs[0].Count != 2 {
		t.Errorf("skip reasons %+v", rs)
	}
}

func TestParsePyverbsUnfinished(t *testing.T) {
	for name, out := range map[string]string{
		"did not load": "Traceback (most recent call last):\nModuleNotFoundError: No module named 'pyverbs'\nHINIC-SUITE-EXIT 1\n",
		"killed":       "test_a (tests.a.A.test_a) ... ok\ntest_b (tests.a.A.test_b) ... \nHINIC-SUITE-EXIT 137\n",
		"disagrees":    "test_a (tests.a.A.test_a) ... ok\n\n------\nRan 2 tests in 0.1s\n\nOK\n",
	} {
		if _, err := ParsePyverbs(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The case on scripted hosts: HiNIC's failures fail it, a baseline NIC's
// are reported; the JSON keeps every test.
func TestPyverbsCase(t *testing.T) {
	for _, nic := range []string{"hicain", "rxe"} {
		h := &suiteHost{nic: nic, run: func(cmd string) (string, error) {
			if !strings.Contains(cmd, "run_tests.py --dev dev0 --gid 3 -v") {
				t.Errorf("command %q", cmd)
			}
			return pyverbsOK + "HINIC-SUITE-EXIT 1\n", nil
		}}
		g := &sshGate{srv: h, cli: h, gidSrv: 3}
		out, err := g.pyverbs(context.Background())
		if (err != nil) != (nic == "hicain") {
			t.Errorf("%s: err %v", nic, err)
		}
		if out.Figure != 3 || out.Unit != "tests passed" || len(out.Tests) != 9 ||
			!strings.Contains(out.Detail, "2× Extended QP is not supported") || !strings.Contains(out.Detail, "ERROR tests.test_qpex") {
			t.Errorf("%s: outcome %+v", nic, out)
		}
	}
}

// suiteHost is a Host whose Run answers with run.
type suiteHost struct {
	nic string
	run func(cmd string) (string, error)
}

func (h *suiteHost) Name() string                                      { return "vm-a" }
func (h *suiteHost) DataIP() string                                    { return "10.42.0.1" }
func (h *suiteHost) Device() string                                    { return "dev0" }
func (h *suiteHost) NIC() string                                       { return h.nic }
func (h *suiteHost) Link() string                                      { return LinkEth }
func (h *suiteHost) Run(_ context.Context, cmd string) (string, error) { return h.run(cmd) }

// The suite's real output in the gate: Soft-RoCE (rxe0) and HiNIC
// (rocep0s4, before the kernel-bypass provider) in TCG guests of one
// make e2e run. A test that prints to the console (test_rdmacm's fork
// check) puts unittest's word on a line of its own.
func TestParsePyverbsGateOutputs(t *testing.T) {
	for _, tc := range []struct {
		file                            string
		passed, failed, errors, skipped int
	}{
		{"testdata/rxe/pyverbs.server.txt", 86, 0, 1, 186},
		{"testdata/hicain/pyverbs.server.txt", 63, 0, 0, 210},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParsePyverbs(string(b))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if r.Ran != 273 || r.Passed != tc.passed || r.Failed != tc.failed || r.Errors != tc.errors || r.Skipped != tc.skipped {
			t.Errorf("%s: ran %d: %d passed, %d failed, %d errors, %d skipped", tc.file, r.Ran, r.Passed, r.Failed, r.Errors, r.Skipped)
		}
	}
}
