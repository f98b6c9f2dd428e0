package cpu_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// writeState leaves the state of a rack with a split fabric whose pid
// is fabricPID, run by exe, in dir.
func writeState(t *testing.T, dir string, fabricPID int, exe string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := deploy.Rack{Name: "cpu", RunDir: dir, Daemons: deploy.DaemonsSplit, Guests: []deploy.Guest{{Name: "vm-a", NIC: deploy.NICRxe}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := deploy.State{Rack: r, FabricPID: fabricPID, FabricExe: exe,
		Guests: []deploy.GuestState{{Name: "vm-a", Dir: filepath.Join(dir, "vm-a")}}}
	b, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCPU: a running fabric (a stand-in with the fabric's command line)
// is listed with its CPU time, in the table and in the JSON object; a
// rack with nothing running is an error that says so.
func TestCPU(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "rack")
	// Its argv holds "fabric serve --config RUN-DIR/fabric.yaml" as the
	// fabric's does; it burns a little CPU first.
	cmd := exec.Command(sh, "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 60", "fabric", "serve", "--config",
		filepath.Join(dir, deploy.FileFabricConf))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	writeState(t, dir, cmd.Process.Pid, sh)

	ios, _, out, errOut := cmdutil.Test()
	if code := cli.Run(context.Background(), []string{"deploy", "cpu", "--run-dir", dir}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out.String(), "PROCESS") || !strings.Contains(out.String(), "fabric") || strings.Contains(out.String(), "qemu:vm-a") {
		t.Errorf("table:\n%s", out)
	}
	ios, _, out, errOut = cmdutil.Test()
	if code := cli.Run(context.Background(), []string{"deploy", "cpu", "--run-dir", dir, "-o", "json"}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var m map[string]float64
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, ok := m["fabric"]; !ok || len(m) != 1 {
		t.Errorf("json: %v", m)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ios, _, _, errOut = cmdutil.Test()
	if code := cli.Run(context.Background(), []string{"deploy", "cpu", "--run-dir", dir}, ios); code == 0 || !strings.Contains(errOut.String(), "no process of the rack") {
		t.Errorf("nothing running: exit %d: %s", code, errOut)
	}
}
