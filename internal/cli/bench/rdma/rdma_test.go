package rdma_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	benchrdma "github.com/PacketFive/hinic/internal/cli/bench/rdma"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/faultsuite"
)

func TestBenchRDMAJSON(t *testing.T) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), []string{"bench", "rdma", "-o", "json", "--sizes", "4096,65536",
		"--mib", "4", "--lat-sizes", "2", "--lat-iters", "50"}, ios)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		MTU int `json:"mtu"`
		Raw struct {
			Frames int     `json:"frames"`
			MiBps  float64 `json:"mib_s"`
		} `json:"raw_ceiling"`
		Copy struct {
			Frames int     `json:"frames"`
			MiBps  float64 `json:"mib_s"`
		} `json:"copy_ceiling"`
		Results []struct {
			Test    string  `json:"test"`
			Size    int     `json:"size"`
			MiBps   float64 `json:"mib_s"`
			VsRaw   float64 `json:"vs_raw"`
			Typical float64 `json:"typical_us"`
			Avg     float64 `json:"avg_us"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.MTU != 4096 || rep.Raw.Frames != 1024 || rep.Raw.MiBps <= 0 || rep.Copy.Frames != 1024 || rep.Copy.MiBps <= 0 ||
		len(rep.Results) != 14 {
		t.Fatalf("%+v", rep)
	}
	for _, r := range rep.Results {
		bw := strings.HasSuffix(r.Test, "_bw") && r.Test != "ib_atomic_bw"
		// ud_send_lat gives the average only.
		if bw && (r.MiBps <= 0 || r.VsRaw <= 0) || !bw && r.Test != "ib_atomic_bw" && r.Typical <= 0 && r.Avg <= 0 {
			t.Errorf("%+v", r)
		}
	}
}

// TestBenchRDMAMaxIters: --max-iters bounds the bandwidth tests'
// iterations (4 MiB of 4 KiB messages would be 1024).
func TestBenchRDMAMaxIters(t *testing.T) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), []string{"bench", "rdma", "-o", "json", "--sizes", "4096",
		"--mib", "4", "--max-iters", "200", "--lat-sizes", "2", "--lat-iters", "20"}, ios)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Results []struct {
			Test  string `json:"test"`
			Size  int    `json:"size"`
			Iters int    `json:"iters"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	n := 0
	for _, r := range rep.Results {
		if strings.HasSuffix(r.Test, "_bw") && r.Test != "ib_atomic_bw" {
			n++
			if r.Iters != 200 {
				t.Errorf("%s %d B: %d iterations, want 200", r.Test, r.Size, r.Iters)
			}
		}
	}
	if n != 5 { // ib_send/write/read_bw, ud_send_bw at 64 B and the MTU
		t.Errorf("%d bandwidth rows: %+v", n, rep.Results)
	}
}

// TestBenchRDMATable: the table has a row per result and the raw
// ceiling's, every one with all the columns.
func TestBenchRDMATable(t *testing.T) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), []string{"bench", "rdma", "--sizes", "4096", "--mib", "4",
		"--lat-sizes", "2", "--lat-iters", "50"}, ios)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "TEST") || !strings.HasPrefix(lines[len(lines)-3], "copy ceiling") ||
		!strings.HasPrefix(lines[len(lines)-2], "raw ceiling") || !strings.HasPrefix(lines[len(lines)-1], "raw pingpong") {
		t.Fatalf("table:\n%s", out)
	}
	want := len(strings.Fields(lines[0])) + 1 // "copy ceiling", "raw ceiling" and "raw pingpong" are two words
	for _, l := range lines[len(lines)-3:] {
		if got := len(strings.Fields(l)); got != want {
			t.Errorf("row %q has %d fields, want %d:\n%s", l, got, want, out)
		}
	}
}

func TestBenchRDMAUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "rdma", "--sizes", "0"},
		{"bench", "rdma", "--mtu", "9000"},
		{"bench", "rdma", "--mib", "0"},
		{"bench", "rdma", "--max-iters", "99"},
		{"bench", "rdma", "--max-iters", "1000001"},
		{"bench", "rdma", "--faults", "--hosts", "3"},
		{"bench", "rdma", "--faults", "--ops", "0"},
		{"bench", "rdma", "--faults", "--drop", "0.9"},
		{"bench", "rdma", "--faults", "--mtu", "9000"},
	} {
		ios, _, _, errOut := cmdutil.Test()
		if code := cli.Run(context.Background(), args, ios); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}

func TestBenchRDMAFaultsJSON(t *testing.T) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), []string{"bench", "rdma", "--faults", "-o", "json", "--ops", "400",
		"--hosts", "4", "--seed", "3", "--drop", "0.02"}, ios)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Hosts   int `json:"hosts"`
		Ops     int `json:"ops"`
		Checked int `json:"checked"`
		Faults  struct {
			Drop float64 `json:"drop"`
			Seed uint64  `json:"seed"`
		} `json:"faults_config"`
		Kinds   []struct{ Kind string } `json:"kinds"`
		Engines []struct {
			Host        string `json:"host"`
			Retransmits uint64 `json:"retransmits"`
		} `json:"engines"`
		Injected struct {
			Drop uint64 `json:"drop"`
		} `json:"faults_injected"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Hosts != 4 || rep.Ops != 400 || rep.Checked != 400 || rep.Faults.Drop != 0.02 || rep.Faults.Seed != 3 ||
		len(rep.Kinds) != int(faultsuite.NumKinds) || len(rep.Engines) != 4 || rep.Engines[3].Host != "host4" {
		t.Fatalf("%+v", rep)
	}
}

func TestCPUProfileWritesAProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := benchrdma.StartCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// runtime/pprof writes a gzip-compressed protobuf.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile is not gzip data: % x", b[:min(len(b), 8)])
	}
	if _, err := benchrdma.StartCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Fatal("a profile in a missing directory started")
	}
}
