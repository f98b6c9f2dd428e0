package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// isolate keeps the developer's environment and config files out of a
// test.
func isolate(t *testing.T) { clitest.Isolate(t, "HINIC_NO_COLOR", "HINIC_VERBOSE", "NO_COLOR") }

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		want       int
		wantStderr []string
		wantStdout string // substring; "" means stdout must be empty
	}{
		{name: "no command prints help", args: nil, want: 0, wantStdout: "Exit codes:"},
		{name: "help", args: []string{"--help"}, want: 0, wantStdout: "130  interrupted"},
		{name: "version", args: []string{"version"}, want: 0, wantStdout: "platform"},
		{
			name: "unknown command", args: []string{"nosuchcmd"}, want: 2,
			wantStderr: []string{`hinic: unknown command "nosuchcmd" for "hinic"`, "Run 'hinic --help' for usage."},
		},
		{
			name: "unknown flag", args: []string{"version", "--bogus"}, want: 2,
			wantStderr: []string{"hinic: unknown flag: --bogus", "Run 'hinic version --help' for usage."},
		},
		{
			name: "bad --output", args: []string{"--output", "yaml", "version"}, want: 2,
			wantStderr: []string{`invalid argument "yaml"`, "valid formats are table, json, csv", "--help"},
		},
		{
			name: "bad -o after the command", args: []string{"version", "-o", "xml"}, want: 2,
			wantStderr: []string{"valid formats are table, json, csv"},
		},
		{
			name: "bad HINIC_OUTPUT", args: []string{"version"}, env: map[string]string{"HINIC_OUTPUT": "yaml"}, want: 2,
			wantStderr: []string{"valid formats are table, json, csv (set by HINIC_OUTPUT)", "--help"},
		},
		{
			name: "extra argument", args: []string{"version", "extra"}, want: 2,
			wantStderr: []string{`unknown command "extra" for "hinic version"`},
		},
		{
			name: "completion without shell", args: []string{"completion"}, want: 2,
			wantStderr: []string{"accepts 1 arg(s), received 0"},
		},
		{
			name: "completion unknown shell", args: []string{"completion", "tcsh"}, want: 2,
			wantStderr: []string{`invalid argument "tcsh"`},
		},
		{
			name: "gen-man without --dir", args: []string{"gen-man"}, want: 2,
			wantStderr: []string{`required flag(s) "dir" not set`},
		},
		{
			name: "missing --config file", args: []string{"--config", "nope.yaml", "version"}, want: 1,
			wantStderr: []string{"hinic: config file nope.yaml does not exist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, out, errOut := cmdutil.Test()
			got := Run(context.Background(), tt.args, ios)
			if got != tt.want {
				t.Errorf("exit code = %d, want %d\nstderr:\n%s", got, tt.want, errOut)
			}
			for _, s := range tt.wantStderr {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if tt.want == 0 && errOut.Len() != 0 {
				t.Errorf("stderr not empty on success:\n%s", errOut)
			}
			if tt.wantStdout == "" && out.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", out)
			}
			if tt.wantStdout != "" && !strings.Contains(out.String(), tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, out)
			}
		})
	}
}

// TestExecuteErrorKinds checks how errors returned by commands' own code
// become exit codes, with test commands added to the real root.
func TestExecuteErrorKinds(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name       string
		run        func(ctx context.Context, cancel context.CancelFunc) error
		args       []string // default: the test command
		want       int
		wantStderr string
	}{
		{name: "ok", run: func(context.Context, context.CancelFunc) error { return nil }, want: 0},
		{name: "error", run: func(context.Context, context.CancelFunc) error { return errBoom }, want: 1, wantStderr: "hinic: boom\n"},
		{
			name: "usage error from run",
			run:  func(context.Context, context.CancelFunc) error { return cmdutil.UsageErrorf("--ports must be 1..64") },
			want: 2, wantStderr: "hinic: --ports must be 1..64\nRun 'hinic testnoun run --help' for usage.\n",
		},
		{
			name: "verification failed",
			run:  func(context.Context, context.CancelFunc) error { return cmdutil.VerifyErrorf("2 of 9 checks failed") },
			want: 3, wantStderr: "hinic: 2 of 9 checks failed\n",
		},
		{
			name: "interrupted",
			run: func(ctx context.Context, cancel context.CancelFunc) error {
				cancel() // as SIGINT would
				<-ctx.Done()
				return ctx.Err()
			},
			want: 130, wantStderr: "hinic: interrupted\n",
		},
		{
			name: "interrupted with a wrapped error",
			run: func(ctx context.Context, cancel context.CancelFunc) error {
				cancel()
				return errBoom // whatever the command says, the user interrupted it
			},
			want: 130, wantStderr: "hinic: interrupted\n",
		},
		{
			name: "clean shutdown after a signal",
			run: func(ctx context.Context, cancel context.CancelFunc) error {
				cancel()
				return nil
			},
			want: 0,
		},
		{name: "noun alone shows help", args: []string{"testnoun"}, want: 0},
		{
			name: "noun with unknown verb", args: []string{"testnoun", "nosuchverb"}, want: 2,
			wantStderr: "hinic: unknown command \"nosuchverb\" for \"hinic testnoun\"\nRun 'hinic testnoun --help' for usage.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ios, _, out, errOut := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			root := NewCmdRoot(f)
			// A noun of the test's own: real nouns (fabric serve) would
			// really run.
			noun := &cobra.Command{Use: "testnoun", Short: "A test noun"}
			noun.AddCommand(&cobra.Command{
				Use: "run",
				RunE: func(cmd *cobra.Command, args []string) error {
					return tt.run(cmd.Context(), cancel)
				},
			})
			root.AddCommand(noun)
			args := tt.args
			if args == nil {
				args = []string{"testnoun", "run"}
			}
			got := execute(ctx, f, root, args)
			if got != tt.want {
				t.Errorf("exit code = %d, want %d", got, tt.want)
			}
			if errOut.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantStderr)
			}
			if tt.name == "noun alone shows help" && !strings.Contains(out.String(), "hinic testnoun [command]") {
				t.Errorf("help not shown:\n%s", out)
			}
		})
	}
}

func TestSignalContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, stop := signalContext()
			defer stop()
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("%v did not cancel the context", sig)
			}
			if got := exitCode(ctx, errors.New("whatever")); got != cmdutil.ExitInterrupted {
				t.Errorf("exit code after %v = %d, want %d", sig, got, cmdutil.ExitInterrupted)
			}
		})
	}
}
