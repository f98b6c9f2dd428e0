package inspect_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/inspect"
	"github.com/PacketFive/hinic/internal/deploy"
)

const spec = "../../../../testdata/racks/two-ib.yaml"

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	t.Setenv("HINIC_OUTPUT", "")
	t.Setenv("HINIC_CONFIG", "")
	t.Chdir(t.TempDir())
	ios, _, out, errOut := cmdutil.Test()
	code := cli.Run(context.Background(), append([]string{"deploy", "inspect"}, args...), ios)
	if code != 0 {
		t.Logf("stderr: %s", errOut)
	}
	return out.String(), code
}

// TestInspectSpec: a spec's guests in the three formats, not deployed.
func TestInspectSpec(t *testing.T) {
	abs, err := filepath.Abs(spec)
	if err != nil {
		t.Fatal(err)
	}
	table, code := run(t, abs)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "SWITCH:PORT") {
		t.Fatalf("table:\n%s", table)
	}
	for _, want := range []string{"vm-b", "not deployed", "hicain", "ib", "10.44.0.2", "52:54:00:44:00:02", "sw1:1", "2243"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row %q lacks %q", lines[2], want)
		}
	}

	out, code := run(t, abs, "-o", "json")
	var in inspect.Inspection
	if err := json.Unmarshal([]byte(out), &in); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if in.Rack != "ib" || len(in.Guests) != 2 || in.Guests[0].Switch != "sw0" || in.Guests[1].SSHPort != 2243 ||
		in.Guests[0].State != deploy.StateNotDeployed || in.Guests[0].Image != ".cache/images/hinic-hicain" {
		t.Errorf("json %+v", in)
	}

	out, code = run(t, abs, "-o", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(recs) != 3 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if strings.Join(recs[0], ",") != "NAME,STATE,NIC,LINK,IP,MAC,SWITCH:PORT,SSH,PID,IMAGE" ||
		strings.Join(recs[1], ",") != "vm-a,not deployed,hicain,ib,10.44.0.1,52:54:00:44:00:01,sw0:1,2242,,.cache/images/hinic-hicain" {
		t.Errorf("csv:\n%s", out)
	}
}

// TestInspectRunDir: a rack brought down lists its guests stopped; a
// bad spec is a usage error naming its line; a run directory without a
// rack fails.
func TestInspectRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := deploy.Rack{Name: "down", RunDir: dir, Guests: []deploy.Guest{{Name: "vm-a"}, {Name: "vm-b", NIC: deploy.NICHicain}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := deploy.State{Rack: r, Down: true, Guests: []deploy.GuestState{
		{Name: "vm-a", PID: 1, Dir: filepath.Join(dir, "vm-a")}, {Name: "vm-b", Dir: filepath.Join(dir, "vm-b")}}}
	b, _ := json.Marshal(&st)
	if err := os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "--run-dir", dir, "-o", "json")
	var in inspect.Inspection
	if err := json.Unmarshal([]byte(out), &in); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if in.Rack != "down" || in.RunDir != dir || len(in.Guests) != 2 || in.Guests[0].State != "stopped" ||
		in.Guests[0].PID != 0 || in.Guests[1].State != "stopped" || in.Guests[1].NIC != deploy.NICHicain {
		t.Errorf("json %+v", in)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("guests:\n  - name: a\n    link: fc\n"), 0o644)
	if _, code := run(t, bad); code != int(cmdutil.ExitUsage) {
		t.Errorf("bad spec: exit %d, want %d", code, cmdutil.ExitUsage)
	}
	if _, code := run(t, bad, "--rack", "x"); code != int(cmdutil.ExitUsage) {
		t.Errorf("SPEC and --rack: exit %d", code)
	}
	if _, code := run(t, "--run-dir", t.TempDir()); code == 0 {
		t.Error("no rack: exit 0")
	}
}
