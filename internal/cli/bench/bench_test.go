package bench_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/bench"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestBenchFabric(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Chdir(t.TempDir())
	for _, format := range []string{"table", "json"} {
		ios, _, out, errOut := cmdutil.Test()
		f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
		f.SetDefault(cmdutil.KeyOutput, format)
		cmd := bench.NewCmdBench(f)
		cmd.SetArgs([]string{"fabric", "--sizes", "64,4200", "--duration", "100ms"})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		if format == "table" {
			for _, want := range []string{"SIZE", "RELAY FRAMES/S", "SWITCH GBIT/S", "RATIO", "4200"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(errOut.String(), "measuring raw relay, 64-byte frames") {
				t.Errorf("progress: %s", errOut)
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("json lines: %q", lines)
		}
		var r struct {
			Size   int     `json:"size"`
			Ratio  float64 `json:"ratio"`
			Switch struct {
				Lost uint64  `json:"lost"`
				FPS  float64 `json:"frames_per_second"`
			} `json:"switch"`
		}
		if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Size != 4200 || r.Ratio <= 0 || r.Switch.FPS <= 0 {
			t.Errorf("record %s: %v", lines[1], err)
		}
	}
}

func TestBenchFabricBadFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, args := range [][]string{{"--sizes", "12"}, {"--batch", "0"}, {"--sizes", "x"}} {
		ios, _, _, _ := cmdutil.Test()
		f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
		cmd := bench.NewCmdBench(f)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetArgs(append([]string{"fabric"}, args...))
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%v: err %v", args, err)
		}
	}
}
