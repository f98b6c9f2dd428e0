package build

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/pkg"
)

func isolate(t *testing.T) {
	clitest.Isolate(t, "HINIC_PKG_KERNEL", "HINIC_PKG_OUT", "HINIC_PKG_ONLY", "HINIC_PKG_FIX", "HINIC_PKG_NO_LINTIAN", "NO_COLOR")
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want Options
	}{
		{name: "defaults", want: Options{Out: DefaultOut}},
		{
			name: "all flags",
			args: []string{"--kernel", "linux-image-6.1.0-57-amd64", "--out", "/tmp/debs", "--only", "hinic,hicain-dkms", "--only", "hinic", "--fix", "--no-lintian"},
			want: Options{Kernel: "6.1.0-57-amd64", Out: "/tmp/debs", Only: []string{"hinic", "hicain-dkms"}, Fix: true, NoLintian: true},
		},
		{
			name: "environment",
			env:  map[string]string{"HINIC_PKG_KERNEL": "6.1.0-58-amd64", "HINIC_PKG_OUT": "out"},
			want: Options{Kernel: "6.1.0-58-amd64", Out: "out"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, _, _ := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			var got *Options
			cmd := NewCmdBuild(f, func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got.Kernel != tt.want.Kernel || got.Out != tt.want.Out || !slices.Equal(got.Only, tt.want.Only) ||
				got.Fix != tt.want.Fix || got.NoLintian != tt.want.NoLintian || got.Commands == nil {
				t.Errorf("options %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--only", "hinic-modules"},
		{"--kernel", "$(reboot)"},
		{"--out", ""},
		{"extra"},
	} {
		isolate(t)
		ios, _, _, _ := cmdutil.Test()
		f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
		cmd := NewCmdBuild(f, func(*Options) error { t.Errorf("%v ran", args); return nil })
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetArgs(args)
		err := cmd.Execute()
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		// cobra's own argument errors become exit 2 in cli.execute; ours
		// are *UsageError.
		if args[0] != "extra" && cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%v: %v exits %d, want %d", args, err, cmdutil.ExitCode(err), cmdutil.ExitUsage)
		}
	}
}

// TestProviderAbsentTable runs the command on a checkout without
// rdma-core/providers/hicain: the table and the JSON say libhicain was not
// built, and a note says why; no file is written.
func TestProviderAbsentTable(t *testing.T) {
	isolate(t)
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module github.com/PacketFive/hinic\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "debs")
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Setenv("HINIC_OUTPUT", format)
			ios, _, stdout, stderr := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			cmd := NewCmdBuild(f, func(o *Options) error { o.Repo = repo; return run(o) })
			cmd.SetArgs([]string{"--only", "libhicain", "--out", out})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if format == "table" {
				lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
				if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME VERSION FILE SIZE SHA256 LINTIAN" ||
					!strings.HasPrefix(lines[1], "libhicain ") || !strings.Contains(lines[1], "not built") {
					t.Errorf("table:\n%s", stdout)
				}
			} else {
				var r pkg.Result
				if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
					t.Fatalf("%v: %s", err, stdout)
				}
				if r.Name != "libhicain" || r.Built || r.Note != pkg.NoteProviderAbsent {
					t.Errorf("json: %+v", r)
				}
			}
			if !strings.Contains(stderr.String(), "note: libhicain was not built: rdma-core/providers/hicain is absent") {
				t.Errorf("stderr:\n%s", stderr)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Errorf("%s has %v", out, ents)
			}
		})
	}
}

func TestLintianSummary(t *testing.T) {
	r := pkg.Result{Checked: true, Lintian: []pkg.LintianTag{{Severity: "W"}, {Severity: "I"}, {Severity: "I"}, {Severity: "O"}}}
	if got := lintianSummary(r, true); got != "1W 2I" {
		t.Errorf("summary %q", got)
	}
	if got := lintianSummary(pkg.Result{Checked: true}, true); got != "clean" {
		t.Errorf("summary %q", got)
	}
	if got := lintianSummary(r, false); got != "not run" {
		t.Errorf("summary %q", got)
	}
}

func TestFindRepo(t *testing.T) {
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "cmd", "hinic", "main.go")); err != nil {
		t.Errorf("FindRepo = %s: %v", repo, err)
	}
	if _, err := FindRepo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not inside a HiNIC checkout") {
		t.Errorf("outside: %v", err)
	}
}
