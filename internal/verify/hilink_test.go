package verify

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The fixtures of testdata/hilink are in the tools' formats (the
// printf formats of hicart-smi topo, hicart-p2p and hicart-allreduce),
// for guests a (gpu_ids 0 and 1) and b (2 and 3) on one HiLink switch;
// the guest-* ones are what the tools printed in the TCG rack.

func TestParseTopo(t *testing.T) {
	r, err := ParseTopo(readFixture(t, "testdata/hilink/topo.a.json.txt"))
	if err != nil || len(r.GPUs) != 4 || r.Matrix[0][1] != "HL" || r.Matrix[2][0] != "HL" || r.GPUs[3].Local {
		t.Fatalf("%+v, %v", r, err)
	}
	good := `{"gpus":[{"gpu_id":0,"ordinal":0,"local":true,"hilink_ports":1},{"gpu_id":1,"ordinal":1,"local":true,"hilink_ports":0}],"matrix":[["X","SYS"],["SYS","X"]]}`
	if _, err := ParseTopo(good); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"no diagonal": strings.Replace(good, `[["X","SYS"]`, `[["SYS","SYS"]`, 1),
		"X off it":    strings.Replace(good, `[["X","SYS"]`, `[["X","X"]`, 1),
		"unknown":     strings.Replace(good, `[["X","SYS"]`, `[["X","NV1"]`, 1),
		"short row":   strings.Replace(good, `[["X","SYS"]`, `[["X"]`, 1),
		"rows":        strings.Replace(good, `,["SYS","X"]]`, `]`, 1),
		"twice":       strings.Replace(good, `"gpu_id":1`, `"gpu_id":0`, 1),
		"id 8":        strings.Replace(good, `"gpu_id":1`, `"gpu_id":8`, 1),
		"ordinal":     strings.Replace(good, `"ordinal":1,"local":true`, `"ordinal":-1,"local":true`, 1),
		"no GPUs":     `{"gpus":[],"matrix":[]}`,
		"not JSON":    "hicart-smi: no HiGPU device\n",
	} {
		if r, err := ParseTopo(bad); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

func TestCheckTopo(t *testing.T) {
	mine := []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1, HiLink: "hl-sw0"}}
	r, err := ParseTopo(readFixture(t, "testdata/hilink/topo.a.json.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if hl, other, err := CheckTopo(r, mine, []int{3, 2}); err != nil || hl != 12 || other != 0 {
		t.Errorf("4 GPUs on HiLink: %d HL, %d other, %v", hl, other, err)
	}
	if _, _, err := CheckTopo(r, mine, []int{2}); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("a remote GPU the spec does not give: %v", err)
	}
	if _, _, err := CheckTopo(r, []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1}}, []int{2, 3}); err == nil ||
		!strings.Contains(err.Error(), "gpu_id 1 has 1 HiLink ports") {
		t.Errorf("a port the spec does not give: %v", err)
	}
	// One GPU without HiLink: SYS to its neighbour, nothing remote.
	none, err := ParseTopo(readFixture(t, "testdata/hilink/topo.none.json.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if hl, other, err := CheckTopo(none, []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1}}, nil); err != nil || hl != 0 || other != 2 {
		t.Errorf("no HiLink on gpu_id 1: %d HL, %d other, %v", hl, other, err)
	}
	// The tool claims a link the ports do not give.
	none.Matrix[0][1] = "HL"
	if _, _, err := CheckTopo(none, []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1}}, nil); err == nil ||
		!strings.Contains(err.Error(), "gpu_id 0 to 1 is HL, want SYS") {
		t.Errorf("a wrong entry: %v", err)
	}
}

func TestParseP2P(t *testing.T) {
	r, err := ParseP2P(readFixture(t, "testdata/hilink/p2p.a.json.txt"))
	if err != nil || len(r.GPUs) != 4 || r.Size != 262144 || *r.BW[0][1] != 0.051 || r.BW[2][0] != nil {
		t.Fatalf("%+v, %v", r, err)
	}
	good := `{"size":64,"iters":1,"gpus":[{"gpu_id":0,"local":true},{"gpu_id":5,"local":false}],"bandwidth_gbps":[[1,2],[null,null]],"latency_us":[[3,4],[null,null]]}`
	if _, err := ParseP2P(good); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"null in a local row":  strings.Replace(good, `[[1,2]`, `[[1,null]`, 1),
		"a figure elsewhere":   strings.Replace(good, `[[1,2],[null,null]]`, `[[1,2],[null,7]]`, 1),
		"zero":                 strings.Replace(good, `[[3,4]`, `[[3,0]`, 1),
		"negative":             strings.Replace(good, `[[1,2]`, `[[1,-2]`, 1),
		"no local GPU":         strings.Replace(strings.Replace(good, `"local":true`, `"local":false`, 1), `[[1,2]`, `[[null,null]`, 1),
		"one GPU":              `{"size":64,"iters":1,"gpus":[{"gpu_id":0,"local":true}],"bandwidth_gbps":[[1]],"latency_us":[[1]]}`,
		"size 0":               strings.Replace(good, `"size":64`, `"size":0`, 1),
		"short row":            strings.Replace(good, `[[3,4]`, `[[3]`, 1),
		"missing latency rows": strings.Replace(good, `"latency_us":[[3,4],[null,null]]`, `"latency_us":[]`, 1),
		"twice":                strings.Replace(good, `"gpu_id":5`, `"gpu_id":0`, 1),
		"infinity":             strings.Replace(good, `[[1,2]`, `[[1,inf]`, 1),
	} {
		if r, err := ParseP2P(bad); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

func TestParseAllreduce(t *testing.T) {
	out := readFixture(t, "testdata/hilink/allreduce.a.txt")
	r, err := ParseAllreduce(out)
	if err != nil || len(r.GPUIDs) != 4 || !r.Remote[2] || r.Remote[1] || len(r.Rows) != 18 || r.OutOfBounds != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if row := r.Rows[9]; row.Type != "bf16" || row.Bytes != 4 || row.Count != 2 || row.TimeUs != 900 {
		t.Errorf("row 9 %+v", row)
	}
	if row := r.Rows[17]; row.Type != "bf16" || row.Bytes != 1024 || row.Count != 512 || row.BusBW != 0.0017 || row.AlgBW != 0.0011 {
		t.Errorf("row 17 %+v", row)
	}
	if err := CheckAllreduce(r, []int{0, 1, 2, 3}, 4, 1024); err != nil {
		t.Error(err)
	}
	if err := CheckAllreduce(r, []int{0, 1, 2, 3}, 4, 2048); err == nil || !strings.Contains(err.Error(), "sizes") {
		t.Errorf("a size missing: %v", err)
	}
	if err := CheckAllreduce(r, []int{0, 1, 2}, 4, 1024); err == nil {
		t.Error("another ring: no error")
	}
	w, err := ParseAllreduce(readFixture(t, "testdata/hilink/allreduce.wrong.txt"))
	if err != nil || w.OutOfBounds != 1 {
		t.Fatalf("%+v, %v", w, err)
	}
	if err := CheckAllreduce(w, []int{0, 1, 2, 3}, 4, 1024); err == nil || !strings.Contains(err.Error(), "bf16 64 B: 3 of 32 elements") {
		t.Errorf("wrong elements: %v", err)
	}
	lines := strings.Split(out, "\n")
	for name, bad := range map[string]string{
		"died":            strings.Join(lines[:8], "\n"),
		"never started":   "hicart-allreduce: a ring needs two GPUs or more\n",
		"count disagrees": strings.Replace(out, "values : 0 OK", "values : 2 FAILED", 1),
		"two rings":       lines[0] + "\n" + out,
		"row after end":   out + lines[5] + "\n",
		"count of size":   strings.Replace(out, "          16            4  float", "          16            5  float", 1),
		"ring size":       strings.Replace(out, "4 GPUs in a ring", "3 GPUs in a ring", 1),
		"ring twice":      strings.Replace(out, "gpu_id 0 1 2* 3*", "gpu_id 0 1 1* 3*", 1),
	} {
		if r, err := ParseAllreduce(bad); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

// linkFake is a guest with GPUs on HiLink: it answers the tools'
// commands with the fixtures, and records them.
type linkFake struct {
	scriptHost
	outs map[string]string // by the command's first word
	rc   map[string]int
	mu   sync.Mutex
	cmds []string
}

func (h *linkFake) Run(ctx context.Context, cmd string) (string, error) {
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd)
	h.mu.Unlock()
	for tool, out := range h.outs {
		if strings.Contains(cmd, tool+" ") {
			if strings.Contains(cmd, exitMarker) {
				return out + exitMarker + " " + strconv.Itoa(h.rc[tool]) + "\n", nil
			}
			return out, nil
		}
	}
	return h.scriptHost.Run(ctx, cmd)
}

func TestHiLinkCases(t *testing.T) {
	peer := readFixture(t, "testdata/hicart/hicart_test.tap.txt")
	mk := func(name, side string) *linkFake {
		return &linkFake{scriptHost: scriptHost{name: name}, rc: map[string]int{}, outs: map[string]string{
			"hicart-smi":       readFixture(t, "testdata/hilink/topo."+side+".json.txt"),
			"hicart-p2p":       readFixture(t, "testdata/hilink/p2p."+side+".json.txt"),
			"hicart-allreduce": readFixture(t, "testdata/hilink/allreduce."+side+".txt"),
			"hicart_test":      peer,
		}}
	}
	a, b := mk("vm-a", "a"), mk("vm-b", "b")
	o := DefaultSSHOptions()
	o.GPUs = []GPU{{ID: 0, MemoryMiB: 256, HiLink: "hl-sw0"}, {ID: 1, MemoryMiB: 256, HiLink: "hl-sw0"}}
	o.ClientGPUs = []GPU{{ID: 2, MemoryMiB: 256, HiLink: "hl-sw0"}, {ID: 3, MemoryMiB: 256, HiLink: "hl-sw0"}}
	o.AllreduceMax = 1024
	ceilings := 0
	o.LinkCeiling = func(context.Context) (LinkCeiling, error) {
		ceilings++
		return LinkCeiling{GBps: 0.5, Detail: "test"}, nil
	}
	ports := []LinkPort{{"hl-sw0", "vm-a/gpu0", []int{0}}, {"hl-sw0", "vm-a/gpu1", []int{1}},
		{"hl-sw0", "vm-b/gpu2", []int{2}}, {"hl-sw0", "vm-b/gpu3", []int{3}}}
	o.LinkPorts = func(context.Context) ([]LinkPort, error) { return ports, nil }
	names := caseNames(SSHCases(a, b, o))
	if got := strings.Join(names[len(names)-6:], " "); got != "hicart_smi hicart_test hicart_bandwidth hicart_smi_topo hicart_p2p hicart_allreduce" {
		t.Errorf("cases %v", names)
	}
	g := &sshGate{srv: a, cli: b, o: o}
	SSHCases(a, b, o) // defaults
	g.o.P2PSize, g.o.P2PIters = DefaultP2PSize, DefaultP2PIters
	ctx := context.Background()

	out, err := g.hicartTopo(ctx)
	if err != nil || out.Figure != 24 || out.Unit != "HL pairs" || !strings.Contains(out.Detail, "GPUs up per HiLink switch: hl-sw0 4") {
		t.Errorf("topo: %+v, %v", out, err)
	}
	if !strings.Contains(a.cmds[0], "hicart-smi topo --json --remote 2,3") || !strings.Contains(b.cmds[0], "--remote 0,1") {
		t.Errorf("topo commands %q %q", a.cmds, b.cmds)
	}
	// A GPU of vm-b up on another rack's HiLink switch.
	ports[3].Switch = "hl-sw1"
	if _, err := g.hicartTopo(ctx); err == nil || !strings.Contains(err.Error(), "vm-b/gpu3 is up on HiLink switches [hl-sw1], the spec cables it to [hl-sw0]") {
		t.Errorf("a GPU on another switch: %v", err)
	}
	ports[3].Switch = "hl-sw0"

	out, err = g.hicartP2P(ctx)
	// The slowest pair of the fixtures: 0 -> 1 at 0.051 GB/s.
	if err != nil || math.Abs(out.Figure-0.051/0.5) > 1e-9 || out.Unit != UnitOfLinkCeiling || len(out.Tests) != 14 ||
		!strings.Contains(out.Detail, "slowest pair 0->1 0.051 GB/s") || !strings.Contains(out.Detail, "3: 0.080 0.081 0.082 0.900") {
		t.Errorf("p2p: %+v, %v", out, err)
	}
	if c := a.cmds[len(a.cmds)-2]; !strings.Contains(c, "hicart-p2p --remote 2,3 --size 262144 --iters 4 --timeout 600 --json") {
		t.Errorf("p2p command %q", c)
	}
	if c := a.cmds[len(a.cmds)-1]; !strings.Contains(c, "hicart_test -d 0 -p") {
		t.Errorf("peer test command %q", c)
	}
	out, err = g.hicartAllreduce(ctx)
	if err != nil || out.Unit != UnitOfLinkCeiling || out.Figure <= 0 || !strings.Contains(out.Detail, "9 sizes of f32 and bf16 from 4 B to 1024 B, 0 wrong elements") {
		t.Errorf("allreduce: %+v, %v", out, err)
	}
	if c := b.cmds[len(b.cmds)-1]; !strings.Contains(c, "hicart-allreduce --remote 0,1 --min-bytes 4 --max-bytes 1024 --dtype all --timeout 600") {
		t.Errorf("allreduce command %q", c)
	}
	if ceilings != 2 {
		t.Errorf("%d ceiling measurements, want one per rate case", ceilings)
	}

	// Failures: a wrong element, a tool that failed, no ceiling.
	b.outs["hicart-allreduce"] = readFixture(t, "testdata/hilink/allreduce.wrong.txt")
	if _, err := g.hicartAllreduce(ctx); err == nil || !strings.Contains(err.Error(), "vm-b: wrong elements") {
		t.Errorf("wrong elements: %v", err)
	}
	a.rc["hicart-p2p"] = 1
	if _, err := g.hicartP2P(ctx); err == nil || !strings.Contains(err.Error(), "vm-a: hicart-p2p exited 1") {
		t.Errorf("p2p failed: %v", err)
	}
	a.rc["hicart-p2p"] = 0
	g.o.LinkCeiling = func(context.Context) (LinkCeiling, error) { return LinkCeiling{}, errors.New("no socketpair") }
	if _, err := g.hicartP2P(ctx); err == nil || !strings.Contains(err.Error(), "no socketpair") {
		t.Errorf("no ceiling: %v", err)
	}
	// The client's p2p rows are missing: it measured nothing.
	g.o.LinkCeiling = o.LinkCeiling
	b.outs["hicart-p2p"] = readFixture(t, "testdata/hilink/p2p.a.json.txt")
	if _, err := g.hicartP2P(ctx); err == nil || !strings.Contains(err.Error(), "vm-b: hicart-p2p measured") {
		t.Errorf("rows measured twice: %v", err)
	}
}

// TestHiLinkCasesAlone: a client whose GPUs are in another rack (or
// none) leaves the HiLink run to the server; a server with one GPU on
// HiLink has only the topo case, and a server without GPUs none.
func TestHiLinkCasesAlone(t *testing.T) {
	a, b := &scriptHost{name: "vm-a"}, &scriptHost{name: "vm-c"}
	g := &sshGate{srv: a, cli: b, o: SSHOptions{
		GPUs:       []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1, HiLink: "hl-sw0"}},
		ClientGPUs: []GPU{{ID: 0, HiLink: "hl-sw1"}, {ID: 1, HiLink: "hl-sw1"}}}}
	sw, hosts := g.linkRun()
	if sw != "hl-sw0" || len(hosts) != 1 || hosts[0].h != a || remoteOf(hosts, 0) != "" {
		t.Errorf("run on %s: %+v", sw, hosts)
	}
	if got := caseNames(g.linkCases()); strings.Join(got, " ") != "hicart_smi_topo hicart_p2p hicart_allreduce" {
		t.Errorf("cases %v", got)
	}
	g.o.GPUs = []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1}}
	if got := caseNames(g.linkCases()); strings.Join(got, " ") != "hicart_smi_topo" {
		t.Errorf("one GPU on HiLink: cases %v", got)
	}
	g.o.GPUs = nil
	if got := g.linkCases(); len(got) != 0 {
		t.Errorf("no GPUs: cases %v", caseNames(got))
	}
}

// FuzzParseHiLink feeds one guest output to the HiLink cases' parsers:
// none may panic, and what each accepts holds its invariants.
func FuzzParseHiLink(f *testing.F) {
	for _, p := range []string{"topo.a.json.txt", "topo.none.json.txt", "p2p.a.json.txt", "allreduce.a.txt", "allreduce.wrong.txt",
		"guest-hicart_smi_topo.vm-b.txt", "guest-hicart_p2p.vm-b.txt", "guest-hicart_allreduce.vm-b.txt"} {
		f.Add(readFixture(f, "testdata/hilink/"+p))
	}
	f.Add("# hicart-allreduce: 2 GPUs in a ring (gpu_id 0 1*;\n 4 1 float sum 1 1 1 0\n# Out of bounds values : 0 OK\n")
	f.Add(`{"gpus":[{"gpu_id":0,"ordinal":0,"local":true}],"matrix":[["X"]]}`)
	f.Fuzz(func(t *testing.T, out string) {
		if r, err := ParseTopo(out); err == nil {
			if len(r.Matrix) != len(r.GPUs) || len(r.GPUs) == 0 {
				t.Fatalf("topo accepted %+v", r)
			}
			for i := range r.GPUs {
				if r.Matrix[i][i] != "X" {
					t.Fatalf("topo accepted %+v", r)
				}
			}
			_, _, _ = CheckTopo(r, []GPU{{ID: 0, HiLink: "hl"}}, []int{1})
		}
		if r, err := ParseP2P(out); err == nil {
			for i, x := range r.GPUs {
				for _, v := range r.BW[i] {
					if (v != nil) != x.Local || (v != nil && !(*v > 0)) {
						t.Fatalf("p2p accepted %+v", r)
					}
				}
			}
		}
		if r, err := ParseAllreduce(out); err == nil {
			if len(r.GPUIDs) < 2 || len(r.GPUIDs) != len(r.Remote) || r.OutOfBounds < 0 {
				t.Fatalf("allreduce accepted %+v", r)
			}
			for _, row := range r.Rows {
				if row.Bytes <= 0 || row.Wrong < 0 || row.Wrong > row.Count || math.IsNaN(row.BusBW) || row.BusBW < 0 {
					t.Fatalf("allreduce accepted %+v", row)
				}
			}
			_ = CheckAllreduce(r, []int{0, 1}, 4, 8)
		}
	})
}

// TestParseHiLinkGuestOutputs parses what the tools printed in the TCG
// rack (testdata/racks/two-hicain-gpu.yaml: vm-a with gpu_ids 0 and 1,
// vm-b with 2 and 3, all on hl-sw0), as the gate saved them, and
// checks them as the cases do.
func TestParseHiLinkGuestOutputs(t *testing.T) {
	a := []GPU{{ID: 0, HiLink: "hl-sw0"}, {ID: 1, HiLink: "hl-sw0"}}
	b := []GPU{{ID: 2, HiLink: "hl-sw0"}, {ID: 3, HiLink: "hl-sw0"}}
	for _, side := range []struct {
		name       string
		mine       []GPU
		remote     []int
		measured   []int
		firstLocal bool
	}{{"vm-a", a, []int{2, 3}, []int{0, 1}, true}, {"vm-b", b, []int{0, 1}, []int{2, 3}, false}} {
		topo, err := ParseTopo(readFixture(t, "testdata/hilink/guest-hicart_smi_topo."+side.name+".txt"))
		if err != nil {
			t.Fatalf("%s topo: %v", side.name, err)
		}
		if hl, other, err := CheckTopo(topo, side.mine, side.remote); err != nil || hl != 12 || other != 0 {
			t.Errorf("%s topo: %d HL, %d other, %v", side.name, hl, other, err)
		}
		p2p, err := ParseP2P(readFixture(t, "testdata/hilink/guest-hicart_p2p."+side.name+".txt"))
		if err != nil || p2p.Size != DefaultP2PSize || p2p.Iters != DefaultP2PIters {
			t.Fatalf("%s p2p: %+v, %v", side.name, p2p, err)
		}
		var local []int
		for _, x := range p2p.GPUs {
			if x.Local {
				local = append(local, x.GPUID)
			}
		}
		if !sameSet(local, side.measured) {
			t.Errorf("%s p2p: local %v", side.name, local)
		}
		ar, err := ParseAllreduce(readFixture(t, "testdata/hilink/guest-hicart_allreduce."+side.name+".txt"))
		if err != nil {
			t.Fatalf("%s allreduce: %v", side.name, err)
		}
		if err := CheckAllreduce(ar, []int{0, 1, 2, 3}, 4, DefaultAllreduceMax); err != nil {
			t.Errorf("%s allreduce: %v", side.name, err)
		}
		if ar.Remote[0] == side.firstLocal {
			t.Errorf("%s allreduce: remote %v", side.name, ar.Remote)
		}
	}
	tap, err := ParseTAP(readFixture(t, "testdata/hilink/guest-hicart_p2p.peer_test.vm-a.txt"))
	if err != nil || tap.Failed != 0 || tap.Passed != tap.Planned || tap.Planned < 20 {
		t.Errorf("hicart_test -p: %+v, %v", tap, err)
	}
}
