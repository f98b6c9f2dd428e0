package status_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// writeState leaves the state of a deployed rack whose processes are all
// gone: guests with GPUs, no backend running.
func writeState(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := deploy.Rack{Name: "gpu", RunDir: dir, Guests: []deploy.Guest{
		{Name: "vm-a", NIC: deploy.NICHicain, GPUs: deploy.GPUs{Count: 2, Memory: 128}},
		{Name: "vm-b", NIC: deploy.NICHicain, GPUs: deploy.GPUs{Count: 1, IDs: []int{5}}},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := deploy.State{Rack: r, Down: true, GPUPID: 0, Guests: []deploy.GuestState{
		{Name: "vm-a", Dir: filepath.Join(dir, "vm-a")}, {Name: "vm-b", Dir: filepath.Join(dir, "vm-b")},
	}}
	b, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStatusGPUs: the table and the JSON list every guest's GPUs from
// the spec, with the state of a GPU backend that is not running, and
// the rack's HiLink switch, stopped too.
func TestStatusGPUs(t *testing.T) {
	dir := writeState(t)
	ios, _, out, errOut := cmdutil.Test()
	if code := cli.Run(context.Background(), []string{"deploy", "status", "--run-dir", dir}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"GPU backend: stopped", "GUEST", "MEMORY", "vm-a", "128 MiB", "256 MiB", "HILINK", "hl-sw0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut.String(), "GPU backend stopped, 3 GPU(s)") || !strings.Contains(errOut.String(), "GPUs 5 stopped") {
		t.Errorf("front view:\n%s", errOut)
	}

	ios, _, out, errOut = cmdutil.Test()
	if code := cli.Run(context.Background(), []string{"deploy", "status", "--run-dir", dir, "-o", "json"}, ios); code != 0 {
		t.Fatalf("json exit %d: %s", code, errOut)
	}
	var rs deploy.RackStatus
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rs.GPU != "stopped" || len(rs.GPUs) != 3 || rs.GPUs[1].ID != 1 || rs.GPUs[1].MemoryMiB != 128 ||
		rs.GPUs[2].Guest != "vm-b" || rs.GPUs[2].ID != 5 || rs.GPUs[2].State != "stopped" {
		t.Errorf("status %+v", rs)
	}
	if len(rs.HiLink) != 1 || rs.HiLink[0].Name != "hl-sw0" || rs.HiLink[0].Rack != "sw0" || rs.HiLink[0].State != "stopped" {
		t.Errorf("HiLink %+v", rs.HiLink)
	}
}
