package compare_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func run(args ...string) (string, string, int) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), args, ios)
	return out.String(), errOut.String(), code
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareTable(t *testing.T) {
	dir := t.TempDir()
	base := write(t, dir, "rxe.json", `{"target":"rack rxe","cases":[
		{"case":"ibv_devices","result":"pass"},
		{"case":"ib_send_bw","result":"pass","figure":6.39,"unit":"MiB/s"},
		{"case":"ib_send_lat","result":"pass","figure":730.6,"unit":"µs"},
		{"case":"ud_multicast","result":"fail","detail":"timeout"}]}`)
	cand := write(t, dir, "hicain.json", `[
		{"case":"ibv_devices","result":"pass"},
		{"case":"ib_send_bw","result":"pass","figure":69.3,"unit":"MiB/s"},
		{"case":"ib_send_lat","result":"pass","figure":252.9,"unit":"µs"},
		{"case":"ud_multicast","result":"pass","figure":900,"unit":"deliveries/s"}]`)
	out, errOut, code := run("verify", "compare", base, cand, "--base-name", "Soft-RoCE", "--new-name", "HiNIC")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"CASE", "Soft-RoCE", "HiNIC/Soft-RoCE", "6.39 MiB/s", "69.3 MiB/s", "10.85", "HiNIC 10.85×",
		"0.35", "HiNIC 2.89×", "fail", "900.0 deliveries/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "2 cases with figures in both runs; HiNIC better in 2") {
		t.Errorf("summary: %s", errOut)
	}

	out, _, code = run("verify", "compare", base, cand, "-o", "json")
	if code != 0 {
		t.Fatalf("json exit %d", code)
	}
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		rows = append(rows, r)
	}
	if len(rows) != 4 || rows[2]["lower_is_better"] != true || rows[1]["ratio"].(float64) < 10.8 {
		t.Errorf("json rows %v", rows)
	}
}

func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	good := write(t, dir, "good.json", `[{"case":"a","result":"pass"}]`)
	bad := write(t, dir, "bad.json", "gate: 15 pass\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{good}, "accepts 2 arg"},
		{[]string{good, filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{good, bad}, "bad.json"},
		{[]string{good, good, "--base-name", ""}, "must not be empty"},
	} {
		_, errOut, code := run(append([]string{"verify", "compare"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestCompareCPU: reports from metered racks get a CPU-per-GiB column,
// and reports without it do not.
func TestCompareCPU(t *testing.T) {
	dir := t.TempDir()
	base := write(t, dir, "rxe.json", `{"target":"rack rxe","cases":[
		{"case":"ib_send_bw","result":"pass","figure":6.39,"unit":"MiB/s","bytes":1048576,"cpu_s":{"fabric":1,"qemu:a":300},"cpu_s_per_gib":310},
		{"case":"ibv_devices","result":"pass","cpu_s":{"fabric":0.1}}]}`)
	cand := write(t, dir, "hicain.json", `{"target":"rack hicain","cases":[
		{"case":"ib_send_bw","result":"pass","figure":69.3,"unit":"MiB/s","cpu_s_per_gib":95.5},
		{"case":"ibv_devices","result":"pass"}]}`)
	out, errOut, code := run("verify", "compare", base, cand, "--base-name", "Soft-RoCE", "--new-name", "HiNIC")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"CPU S/GIB Soft-RoCE / HiNIC", "310 / 95.5", "- / -"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	plain := write(t, dir, "plain.json", `[{"case":"ib_send_bw","result":"pass","figure":6.39,"unit":"MiB/s"}]`)
	out, _, _ = run("verify", "compare", plain, plain)
	if strings.Contains(out, "CPU") {
		t.Errorf("unmetered reports got a CPU column:\n%s", out)
	}
}

// TestCompareHiNICOnly: the GPU cases, which the Soft-RoCE run lacks,
// are the HiNIC run's only.
func TestCompareHiNICOnly(t *testing.T) {
	dir := t.TempDir()
	base := write(t, dir, "rxe.json", `[{"case":"ib_send_bw","result":"pass","figure":6.39,"unit":"MiB/s"}]`)
	cand := write(t, dir, "gpu.json", `[{"case":"ib_send_bw","result":"pass","figure":69.3,"unit":"MiB/s"},
		{"case":"hicart_bandwidth","result":"pass","figure":0.72,"unit":"× memcpy"}]`)
	out, errOut, code := run("verify", "compare", base, cand, "--base-name", "Soft-RoCE", "--new-name", "HiNIC")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "hicart_bandwidth") {
			line = l
		}
	}
	for _, want := range []string{"absent", "0.72 × memcpy", "HiNIC only"} {
		if !strings.Contains(line, want) {
			t.Errorf("no %q in %q:\n%s", want, line, out)
		}
	}
	if !strings.Contains(errOut, "1 cases with figures in both runs") {
		t.Errorf("summary: %s", errOut)
	}
}
