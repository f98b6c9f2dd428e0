package rdma_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
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
		Results []struct {
			Test    string  `json:"test"`
			Size    int     `json:"size"`
			MiBps   float64 `json:"mib_s"`
			VsRaw   float64 `json:"vs_raw"`
			Typical float64 `json:"typical_us"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.MTU != 4096 || rep.Raw.Frames != 1024 || rep.Raw.MiBps <= 0 || len(rep.Results) != 11 {
		t.Fatalf("%+v", rep)
	}
	for _, r := range rep.Results {
		bw := strings.HasSuffix(r.Test, "_bw") && r.Test != "ib_atomic_bw"
		if bw && (r.MiBps <= 0 || r.VsRaw <= 0) || !bw && r.Test != "ib_atomic_bw" && r.Typical <= 0 {
			t.Errorf("%+v", r)
		}
	}
}

func TestBenchRDMAUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "rdma", "--sizes", "0"},
		{"bench", "rdma", "--mtu", "9000"},
		{"bench", "rdma", "--mib", "0"},
	} {
		ios, _, _, errOut := cmdutil.Test()
		if code := cli.Run(context.Background(), args, ios); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}
