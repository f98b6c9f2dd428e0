package e2e_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/verify"
)

func run(args ...string) (string, string, int) {
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), args, ios)
	return out.String(), errOut.String(), code
}

// TestGateJSONAndJUnit runs the real command on the embedded rack with
// small iteration counts and checks the JSON report, the JUnit file and the
// capture it leaves.
func TestGateJSONAndJUnit(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "gate.xml")
	full := filepath.Join(dir, "gate.json")
	out, errOut, code := run("verify", "e2e", "-o", "json", "--mtu", "1024", "--pingpong-iters", "20",
		"--bw-iters", "50", "--lat-iters", "50", "--junit", junit, "--json", full, "--pcap", filepath.Join(dir, "pcap"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var cases []struct {
		Case, Result, Unit, Detail string
		Figure                     float64
	}
	if err := json.Unmarshal([]byte(out), &cases); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"ibv_devinfo", "ibv_rc_pingpong", "integrity", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong", "ib_send_bw", "ib_write_bw", "ib_read_bw",
		"ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_bw", "ib_atomic_lat", "ud_multicast", "ib:subnet"}
	for _, c := range want[:15] {
		want = append(want, "ib:"+c)
	}
	if len(cases) != len(want) {
		t.Fatalf("%d cases", len(cases))
	}
	for i, c := range cases {
		if c.Case != want[i] || c.Result != "pass" || c.Figure <= 0 || c.Unit == "" {
			t.Errorf("case %d: %+v", i, c)
		}
	}
	f, err := os.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.ReadReport(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Target == "" || rep.Duration <= 0 || len(rep.Cases) != len(want) || rep.Cases[0].Case != want[0] {
		t.Errorf("--json report: target %q, %.1f s, %d cases", rep.Target, rep.Duration, len(rep.Cases))
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil || doc.Tests != len(want) || doc.Failures != 0 {
		t.Fatalf("junit %+v %v", doc, err)
	}
	// The capture decodes with every ICRC valid.
	_, errOut, code = run("proto", "decode", "--check-icrc", "-o", "json", filepath.Join(dir, "pcap", "sw0-port1.pcap"))
	if code != 0 || !strings.Contains(errOut, " 0 with a bad ICRC") {
		t.Fatalf("decode exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "transport frames") {
		t.Fatal(errOut)
	}
	// So does the InfiniBand run's (LINKTYPE_INFINIBAND, ICRC and VCRC).
	_, errOut, code = run("proto", "decode", "--check-icrc", "-o", "json", filepath.Join(dir, "pcap", "ib", "sw0-port2.pcap"))
	if code != 0 || !strings.Contains(errOut, " 0 with a bad ICRC") {
		t.Fatalf("decode of the IB capture: exit %d: %s", code, errOut)
	}
}

func TestGateLinkFlag(t *testing.T) {
	_, errOut, code := run("verify", "e2e", "--link", "fc")
	if code != 2 || !strings.Contains(errOut, "--link") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, errOut, code := run("verify", "e2e", "-o", "json", "--link", "ib", "--pingpong-iters", "10",
		"--bw-iters", "20", "--lat-iters", "20")
	if code != 0 || !strings.Contains(out, `"ib:subnet"`) || !strings.Contains(out, `"ib:ud_multicast"`) ||
		strings.Contains(out, `"ud_multicast"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestGateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "e2e", "--mtu", "1500"},
		{"verify", "e2e", "--bw-iters", "0"},
		{"verify", "e2e", "--bw-size", "4000000"},
		{"verify", "e2e", "--embedded=false"},
	} {
		if _, errOut, code := run(args...); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}
