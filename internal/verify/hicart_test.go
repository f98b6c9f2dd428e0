package verify

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseHicartSMI(t *testing.T) {
	r, err := ParseHicartSMI("Warning: a line on stderr\n" + readFixture(t, "testdata/hicart/smi.json.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.DriverUAPI != 1 || len(r.GPUs) != 2 || r.GPUs[1].GPUID != 1 || r.GPUs[1].Memory.Used != 2<<20 ||
		r.GPUs[1].Utilization != 12.5 || r.GPUs[0].Device != "/dev/higpu0" {
		t.Errorf("got %+v", r)
	}
	spec := []GPU{{ID: 1, MemoryMiB: 256}, {ID: 0, MemoryMiB: 256}}
	if ids, err := CheckSMI(r, spec); err != nil || len(ids) != 2 || ids[0] != 0 {
		t.Errorf("CheckSMI: %v, %v", ids, err)
	}
	for name, tc := range map[string]struct {
		spec []GPU
		want string
	}{
		"memory":    {[]GPU{{ID: 0, MemoryMiB: 128}, {ID: 1, MemoryMiB: 256}}, "gpu_id 0: 268435456 bytes of device memory, the spec gives 128 MiB"},
		"other id":  {[]GPU{{ID: 0, MemoryMiB: 256}, {ID: 2, MemoryMiB: 256}}, "missing: 2"},
		"one more":  {[]GPU{{ID: 0, MemoryMiB: 256}, {ID: 1, MemoryMiB: 256}, {ID: 2, MemoryMiB: 256}}, "the spec gives 3 GPUs"},
		"one fewer": {[]GPU{{ID: 0, MemoryMiB: 256}}, "the spec gives 1 GPUs"},
	} {
		if _, err := CheckSMI(r, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
	g := func(ord, id int, total, used uint64) string {
		return fmt.Sprintf(`{"ordinal":%d,"gpu_id":%d,"memory":{"total":%d,"used":%d},"utilization":1.0}`, ord, id, total, used)
	}
	for name, out := range map[string]string{
		"no JSON":        "hicart-smi: no HiGPU device\n",
		"truncated":      `{"driver_uapi":1,"gpus":[` + g(0, 0, 1, 0),
		"no gpus":        `{"driver_uapi":1}`,
		"ordinal order":  `{"gpus":[` + g(1, 0, 1, 0) + "]}",
		"duplicate id":   `{"gpus":[` + g(0, 3, 1, 0) + "," + g(1, 3, 1, 0) + "]}",
		"id 8":           `{"gpus":[` + g(0, 8, 1, 0) + "]}",
		"used > total":   `{"gpus":[` + g(0, 0, 4096, 8192) + "]}",
		"no memory":      `{"gpus":[` + g(0, 0, 0, 0) + "]}",
		"utilization":    `{"gpus":[{"ordinal":0,"gpu_id":0,"memory":{"total":1},"utilization":101}]}`,
		"negative total": `{"gpus":[{"ordinal":0,"gpu_id":0,"memory":{"total":-1}}]}`,
	} {
		if _, err := ParseHicartSMI(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if r, err := ParseHicartSMI(`{"driver_uapi":1,"gpus":[]}`); err != nil || len(r.GPUs) != 0 {
		t.Errorf("no GPU: %v, %v", r, err)
	} else if _, err := CheckSMI(r, []GPU{{ID: 0, MemoryMiB: 256}}); err == nil {
		t.Error("CheckSMI: no GPU listed, no error")
	}
}

func TestParseHicartBandwidth(t *testing.T) {
	b, err := ParseHicartBandwidth(readFixture(t, "testdata/hicart/bandwidth.json.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Device != 1 || b.Size != 8<<20 || b.Iters != 10 || b.HostMemory != "pinned" || b.GBps.Memcpy != 0.412 || b.Ratio.D2D != 14.248 {
		t.Errorf("got %+v", b)
	}
	if r, dir := b.Lowest(); r != 0.721 || dir != "D2H" {
		t.Errorf("lowest %v %s", r, dir)
	}
	if got := gibps(1.073741824); math.Abs(got-1) > 1e-12 {
		t.Errorf("1.073741824 GB/s = %v GiB/s", got)
	}
	ok := `"size":8,"iters":1,"gbps":{"host_memcpy":1,"h2d":1,"d2h":1,"d2d":1},"ratio":{"h2d":1,"d2h":1,"d2d":1}`
	for name, out := range map[string]string{
		"no JSON":         "hicart-bandwidth: hicartMalloc(&d0, size): out of memory\n",
		"inf":             `{"size":8,"iters":1,"gbps":{"host_memcpy":0.000,"h2d":1},"ratio":{"h2d":inf,"d2h":inf,"d2d":inf}}`,
		"no ceiling":      `{"size":8,"iters":1,"gbps":{"host_memcpy":0,"h2d":1,"d2h":1,"d2d":1},"ratio":{"h2d":0,"d2h":0,"d2d":0}}`,
		"negative":        `{` + strings.Replace(ok, `"h2d":1`, `"h2d":-1`, 1) + `}`,
		"no size":         `{` + strings.Replace(ok, `"size":8`, `"size":0`, 1) + `}`,
		"no iters":        `{` + strings.Replace(ok, `"iters":1`, `"iters":0`, 1) + `}`,
		"string for rate": `{` + strings.Replace(ok, `"d2d":1}`, `"d2d":"fast"}`, 1) + `}`,
	} {
		if _, err := ParseHicartBandwidth(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ParseHicartBandwidth("{" + ok + "}"); err != nil {
		t.Errorf("minimal: %v", err)
	}
}

func TestParseTAP(t *testing.T) {
	r, err := ParseTAP(readFixture(t, "testdata/hicart/hicart_test.tap.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Planned != 7 || r.Passed != 5 || r.Failed != 0 || r.Skipped != 1 || len(r.Tests) != 7 {
		t.Errorf("got %+v", r)
	}
	if x := r.Tests[4]; x.Result != TestSkip || x.Reason != "the device has no cross-stream waits" || x.Name != "5" {
		t.Errorf("test 5: %+v", x)
	}
	if x := r.Tests[5]; x.Result != TestXFail || x.Reason != "half precision rounding" || x.Name != "6 kernels: reduce f16 sum" {
		t.Errorf("test 6: %+v", x)
	}
	if x := r.Tests[0]; x.Result != TestOK || !strings.HasPrefix(x.Name, `1 device 0: "HiGPU"`) {
		t.Errorf("test 1: %+v", x)
	}

	r, err = ParseTAP(readFixture(t, "testdata/hicart/hicart_test.fail.tap.txt"))
	if err != nil || r.Passed != 3 || r.Failed != 1 || r.Tests[2].Result != TestFail || r.Tests[2].Name != "3 kernels: axpy f32 matches the CPU reference" {
		t.Errorf("failing run: %+v, %v", r, err)
	}
	r, err = ParseTAP(readFixture(t, "testdata/hicart/hicart_test.nodev.txt"))
	if err != nil || r.Planned != 0 || r.SkipAll != "no HiGPU device (no device)" {
		t.Errorf("skip all: %+v, %v", r, err)
	}
	// A plan first, as TAP also allows.
	if r, err := ParseTAP("1..2\nok 1\nnot ok 2 - b\n"); err != nil || r.Passed != 1 || r.Failed != 1 {
		t.Errorf("plan first: %+v, %v", r, err)
	}
	for name, out := range map[string]string{
		"died":         readFixture(t, "testdata/hicart/hicart_test.died.txt"),
		"plan short":   "ok 1\nok 2\n1..3\n",
		"plan long":    "ok 1\nok 2\n1..1\n",
		"two plans":    "1..1\nok 1\n1..1\n",
		"out of order": "ok 1\nok 3\n1..2\n",
		"repeated":     "ok 1\nok 1\n1..2\n",
		"bail out":     "ok 1\nBail out! the device went fatal\n1..1\n",
		"empty":        "",
		"huge plan":    "1..99999999999999999999\n",
	} {
		if _, err := ParseTAP(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// gpuHost is a Host with GPUs: hicart-smi, hicart_test and
// hicart-bandwidth answer from per-device outputs.
type gpuHost struct {
	scriptHost
	smi  string
	tap  map[int]string // by device ordinal; the exit status follows
	rc   map[int]int
	bw   map[int]string
	mu   sync.Mutex
	cmds []string
}

func (h *gpuHost) Run(ctx context.Context, cmd string) (string, error) {
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd)
	h.mu.Unlock()
	var dev int
	switch {
	case cmd == "hicart-smi --json":
		return h.smi, nil
	case strings.Contains(cmd, "hicart_test -d "):
		fmt.Sscanf(cmd[strings.Index(cmd, "hicart_test -d ")+len("hicart_test -d "):], "%d", &dev)
		return fmt.Sprintf("%s%s %d\n", h.tap[dev], exitMarker, h.rc[dev]), nil
	case strings.Contains(cmd, "hicart-bandwidth --device "):
		fmt.Sscanf(cmd[strings.Index(cmd, "--device ")+len("--device "):], "%d", &dev)
		if out, ok := h.bw[dev]; ok {
			return out, nil
		}
		return "hicart-bandwidth: hicartSetDevice(dev): invalid device", fmt.Errorf("exit status 1")
	}
	return h.scriptHost.Run(ctx, cmd)
}

func caseNames(cs []Case) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

// TestGPUCasesListed: the GPU cases come last, and only when the spec
// gives the server GPUs; without HiLink ports the HiLink cases are
// topo alone.
func TestGPUCasesListed(t *testing.T) {
	srv, cli := &scriptHost{name: "a"}, &scriptHost{name: "b"}
	names := caseNames(SSHCases(srv, cli, DefaultSSHOptions()))
	for _, n := range names {
		if strings.HasPrefix(n, "hicart") {
			t.Errorf("case %s listed without GPUs", n)
		}
	}
	o := DefaultSSHOptions()
	o.GPUs = []GPU{{ID: 0, MemoryMiB: 256}}
	got := caseNames(SSHCases(srv, cli, o))
	if len(got) != len(names)+4 || strings.Join(got[len(got)-4:], " ") != "hicart_smi hicart_test hicart_bandwidth hicart_smi_topo" {
		t.Errorf("cases %v", got)
	}
}

func TestGPUCases(t *testing.T) {
	tap := readFixture(t, "testdata/hicart/hicart_test.tap.txt")
	bw := readFixture(t, "testdata/hicart/bandwidth.json.txt")
	bw0 := strings.Replace(strings.Replace(bw, `"device":1`, `"device":0`, 1), `"h2d":0.740`, `"h2d":0.500`, 1)
	newGate := func(h *gpuHost) *sshGate {
		o := DefaultSSHOptions()
		o.GPUs = []GPU{{ID: 0, MemoryMiB: 256}, {ID: 1, MemoryMiB: 256}}
		o.Timeout = time.Minute
		return &sshGate{srv: h, cli: &scriptHost{name: "b"}, o: o}
	}
	h := &gpuHost{scriptHost: scriptHost{name: "vm-a"}, smi: readFixture(t, "testdata/hicart/smi.json.txt"),
		tap: map[int]string{0: tap, 1: tap}, rc: map[int]int{}, bw: map[int]string{0: bw0, 1: bw}}
	g := newGate(h)
	ctx := context.Background()

	o, err := g.hicartSMI(ctx)
	if err != nil || o.Figure != 2 || o.Unit != "GPUs" || !strings.Contains(o.Detail, "gpu_id 1 HiGPU 256 MiB (/dev/higpu1, ABI 1.0)") {
		t.Errorf("hicart_smi: %+v, %v", o, err)
	}
	o, err = g.hicartTest(ctx)
	if err != nil || o.Figure != 10 || o.Unit != "tests passed" || len(o.Tests) != 14 || o.Tests[7].Name != "device 1: 1 device 0: \"HiGPU\", 256 MiB, gpu_id 0, 0 HiLink ports, ABI 1.0" {
		t.Errorf("hicart_test: %+v, %v", o, err)
	}
	o, err = g.hicartBandwidth(ctx)
	if err != nil || o.Figure != 0.5 || o.Unit != UnitOfMemcpy || !strings.Contains(o.Detail, "lowest H2D of gpu_id 0") ||
		!strings.Contains(o.Detail, "D2D 5.467 GiB/s (14.248×)") {
		t.Errorf("hicart_bandwidth: %+v, %v", o, err)
	}
	var ran []string
	for _, c := range h.cmds {
		if strings.Contains(c, "hicart") {
			ran = append(ran, c)
		}
	}
	if len(ran) != 5 || !strings.Contains(ran[1], "timeout -s KILL 600 hicart_test -d 0 2>&1; echo HINIC-EXIT $?") ||
		!strings.Contains(ran[4], "hicart-bandwidth --device 1 --size 8388608 --iters 10 --json") {
		t.Errorf("commands %q", ran)
	}

	// The spec and the guest disagree.
	g.o.GPUs = []GPU{{ID: 0, MemoryMiB: 512}, {ID: 1, MemoryMiB: 256}}
	if _, err := g.hicartSMI(ctx); err == nil || !strings.Contains(err.Error(), "the spec gives 512 MiB") {
		t.Errorf("hicart_smi, other memory: %v", err)
	}
	// A failing test, a run that died, no device, a non-zero exit
	// with every test ok.
	for name, tc := range map[string]struct {
		tap  string
		rc   int
		want string
	}{
		"not ok":    {readFixture(t, "testdata/hicart/hicart_test.fail.tap.txt"), 1, "not ok: device 1: 3 kernels: axpy f32"},
		"died":      {readFixture(t, "testdata/hicart/hicart_test.died.txt"), 139, "exit 139"},
		"no dev":    {readFixture(t, "testdata/hicart/hicart_test.nodev.txt"), 77, "no HiGPU device, though the spec gives 2 GPUs"},
		"exit 1":    {tap, 1, "device 1: exit 1 with every test ok"},
		"no plan 0": {"", 0, "no plan"},
	} {
		h := &gpuHost{scriptHost: scriptHost{name: "vm-a"}, tap: map[int]string{0: tap, 1: tc.tap}, rc: map[int]int{1: tc.rc}}
		o, err := newGate(h).hicartTest(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v, err %v, want %q", name, o, err, tc.want)
		}
	}
	h = &gpuHost{scriptHost: scriptHost{name: "vm-a"}, bw: map[int]string{0: bw0}}
	if _, err := newGate(h).hicartBandwidth(ctx); err == nil || !strings.Contains(err.Error(), "invalid device") {
		t.Errorf("hicart_bandwidth on a missing device: %v", err)
	}
}

// TestCompareGPUCases: a GPU case only the HiNIC run has is marked as
// such; two GPU runs compare their ratios.
func TestCompareGPUCases(t *testing.T) {
	base := &Report{Cases: []CaseResult{{Case: "ib_send_bw", Result: Pass, Figure: 6, Unit: "MiB/s"}}}
	cand := &Report{Cases: []CaseResult{{Case: "ib_send_bw", Result: Pass, Figure: 60, Unit: "MiB/s"},
		{Case: "hicart_bandwidth", Result: Pass, Figure: 0.7, Unit: UnitOfMemcpy}}}
	rows := Compare(base, cand)
	if len(rows) != 2 || rows[1].Case != "hicart_bandwidth" || rows[1].Only != OnlyNew || rows[1].Ratio != 0 || rows[0].Only != "" {
		t.Errorf("rows %+v", rows)
	}
	rows = Compare(cand, &Report{Cases: []CaseResult{{Case: "hicart_bandwidth", Result: Pass, Figure: 1.4, Unit: UnitOfMemcpy}}})
	if len(rows) != 2 || rows[0].Only != OnlyBase || rows[1].Ratio != 2 || rows[1].Gain != 2 {
		t.Errorf("rows %+v", rows)
	}
}

// FuzzParseHicart feeds one guest output to the parsers of the GPU
// cases: none may panic, and what each accepts is self-consistent.
func FuzzParseHicart(f *testing.F) {
	for _, p := range []string{"smi.json.txt", "bandwidth.json.txt", "hicart_test.tap.txt", "hicart_test.fail.tap.txt",
		"hicart_test.nodev.txt", "hicart_test.died.txt"} {
		f.Add(readFixture(f, "testdata/hicart/"+p))
	}
	f.Add("1..2\nok 1 # skip\nnot ok 2 # todo later\n")
	f.Add("ok 1 - a # b c\nnot ok\n# diag\nBail out!\n1..2\n")
	f.Add(`{"gpus":[{"ordinal":0,"gpu_id":7,"memory":{"total":1,"used":1}}]}`)
	f.Fuzz(func(t *testing.T, out string) {
		if r, err := ParseTAP(out); err == nil {
			xfail := 0
			for _, x := range r.Tests {
				if x.Result == TestXFail {
					xfail++
				}
			}
			if r.Planned != len(r.Tests) || r.Passed+r.Failed+r.Skipped+xfail != len(r.Tests) {
				t.Fatalf("TAP accepted inconsistent: %+v", r)
			}
		}
		if b, err := ParseHicartBandwidth(out); err == nil {
			if l, _ := b.Lowest(); math.IsNaN(l) || l < 0 || b.GBps.Memcpy <= 0 || b.Size <= 0 {
				t.Fatalf("bandwidth accepted: %+v", b)
			}
		}
		if r, err := ParseHicartSMI(out); err == nil {
			seen := map[int]bool{}
			for i, g := range r.GPUs {
				if g.Ordinal != i || g.GPUID < 0 || g.GPUID > 7 || seen[g.GPUID] || g.Memory.Used > g.Memory.Total {
					t.Fatalf("hicart-smi accepted: %+v", r)
				}
				seen[g.GPUID] = true
			}
			_, _ = CheckSMI(r, []GPU{{ID: 0, MemoryMiB: 256}})
		}
	})
}

// TestParseHicartGuestOutputs parses what the tools printed in a TCG
// guest of the GPU rack (hicart-smi --json, hicart-bandwidth --json,
// hicart_test -d 0 with the gate's exit line), as the gate saved them.
func TestParseHicartGuestOutputs(t *testing.T) {
	smi, err := ParseHicartSMI(readFixture(t, "testdata/hicart/guest-smi.json.txt"))
	if err != nil || len(smi.GPUs) != 2 || smi.GPUs[0].GPUID != 0 || smi.GPUs[1].GPUID != 1 {
		t.Fatalf("smi: %+v, %v", smi, err)
	}
	if _, err := CheckSMI(smi, []GPU{{ID: 0, MemoryMiB: 256}, {ID: 1, MemoryMiB: 256}}); err != nil {
		t.Errorf("CheckSMI: %v", err)
	}
	bw, err := ParseHicartBandwidth(readFixture(t, "testdata/hicart/guest-bandwidth.json.txt"))
	if err != nil || bw.Size != 8<<20 || bw.GBps.Memcpy <= 0 || bw.GBps.H2D <= 0 || bw.GBps.D2H <= 0 || bw.GBps.D2D <= 0 {
		t.Fatalf("bandwidth: %+v, %v", bw, err)
	}
	if r, which := bw.Lowest(); r <= 0 || which == "" {
		t.Errorf("Lowest: %v %q", r, which)
	}
	tap, err := ParseTAP(readFixture(t, "testdata/hicart/guest-hicart_test.tap.txt"))
	if err != nil || tap.Planned != 86 || tap.Passed != 86 || tap.Failed != 0 {
		t.Fatalf("tap: planned %d, passed %d, failed %d, %v", tap.Planned, tap.Passed, tap.Failed, err)
	}
}
