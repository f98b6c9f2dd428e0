package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestRackRunDir(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "r.yaml")
	os.WriteFile(spec, []byte("name: lab\nrun-dir: /tmp/hinic-rack-lab2\n"), 0o644)
	for _, tc := range []struct{ in, want string }{
		{"lab1", filepath.Join(os.TempDir(), "hinic-rack-lab1")},
		{dir, dir},
		{spec, "/tmp/hinic-rack-lab2"},
	} {
		got, err := RackRunDir(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("RackRunDir(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := RackRunDir("./no/such/dir"); err == nil {
		t.Error("missing path: no error")
	}
}

func TestRackFlagKeepsEmbeddedDefault(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *Options
	cmd := NewCmdE2E(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Rack != "" || !got.Embedded {
		t.Errorf("no --rack: %+v", got)
	}
	cmd = NewCmdE2E(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--rack", "rxe", "--save", "out", "--case", "ib_write_bw", "--bw-iters", "50"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Rack != "rxe" || got.Save != "out" || len(got.Only) != 1 || !got.changed("bw-iters") || got.changed("lat-iters") {
		t.Errorf("--rack: %+v", got)
	}
}

func TestRackNotDeployed(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := NewCmdE2E(f, nil)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs([]string{"--rack", t.TempDir()})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "deploy a rack first") {
		t.Errorf("err %v", err)
	}
}
