package cli

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestResolveBuildInfo(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name                  string
		version, commit, date string
		info                  *debug.BuildInfo
		want                  cmdutil.BuildInfo
	}{
		{
			name: "nothing known",
			want: cmdutil.BuildInfo{Version: "dev", Commit: "unknown", Date: "unknown"},
		},
		{
			name:    "linker flags win",
			version: "v1.2.3", commit: "abc", date: "2026-11-30T10:00:00Z",
			info: vcs("vcs.revision", "def", "vcs.time", "2020-01-01T00:00:00Z"),
			want: cmdutil.BuildInfo{Version: "v1.2.3", Commit: "abc", Date: "2026-11-30T10:00:00Z"},
		},
		{
			name: "vcs fallback",
			info: vcs("vcs.revision", "def", "vcs.time", "2020-01-01T00:00:00Z", "vcs.modified", "false"),
			want: cmdutil.BuildInfo{Version: "dev", Commit: "def", Date: "2020-01-01T00:00:00Z"},
		},
		{
			name: "dirty tree",
			info: vcs("vcs.revision", "def", "vcs.modified", "true"),
			want: cmdutil.BuildInfo{Version: "dev", Commit: "def-dirty", Date: "unknown"},
		},
		{
			name: "go install pkg@version",
			info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			want: cmdutil.BuildInfo{Version: "v0.4.0", Commit: "unknown", Date: "unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Go = runtime.Version()
			tt.want.Platform = platform
			got := resolveBuildInfo(tt.version, tt.commit, tt.date, tt.info)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	isolate(t)
	ios, _, out, errOut := cmdutil.Test()
	if code := Run(context.Background(), []string{"--output", "json", "version"}, ios); code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, errOut)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not a JSON object of strings: %v\n%s", err, out)
	}
	keys := make([]string, 0, len(got))
	for k, v := range got {
		keys = append(keys, k)
		if v == "" {
			t.Errorf("%s is empty", k)
		}
	}
	if diff := cmp.Diff([]string{"commit", "date", "go", "platform", "version"}, keys, sortStrings); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if got["go"] != runtime.Version() || got["platform"] != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("go/platform = %q/%q", got["go"], got["platform"])
	}
	if !strings.HasPrefix(out.String(), "{\n  ") {
		t.Errorf("a single result should be an indented document:\n%s", out)
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestVersionTable(t *testing.T) {
	isolate(t)
	ios, _, out, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{
		Version: "v1.2.3", Commit: "0123abc", Date: "2026-11-30T10:00:00Z", Go: "go1.26.8", Platform: "linux/arm64",
	})
	if err := versionRun(&VersionOptions{Build: f.Build, Printer: f.Printer}); err != nil {
		t.Fatal(err)
	}
	want := "version   v1.2.3\n" +
		"commit    0123abc\n" +
		"date      2026-11-30T10:00:00Z\n" +
		"go        go1.26.8\n" +
		"platform  linux/arm64\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNewCmdVersionOptions(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	build := cmdutil.BuildInfo{Version: "v9"}
	f := cmdutil.NewFactory(ios, build)
	var got *VersionOptions
	cmd := NewCmdVersion(f, func(o *VersionOptions) error { got = o; return nil })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Build != build {
		t.Errorf("options = %+v, want Build %+v", got, build)
	}
}
