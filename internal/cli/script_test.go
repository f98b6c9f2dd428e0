package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/PacketFive/hinic/internal/cli"
)

// TestMain lets the test binary act as `hinic` in scripts: testscript
// runs it under that name, and it enters through cli.Main exactly as
// cmd/hinic's main does, exit code included.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"hinic": func() { os.Exit(cli.Main(os.Args[1:])) },
	})
}

// TestScripts runs the end-to-end scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// No config file from the real home directory.
			env.Setenv("XDG_CONFIG_HOME", env.WorkDir+"/xdg")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
		},
	})
}

// cmdExitCode is `exitcode N program [args...]`: run program and fail
// unless it exits with status N. Its stdout and stderr are then checked
// with the stdout and stderr commands as after exec. testscript's `! exec`
// only tells zero from non-zero, and hinic's exit codes are part of its
// interface.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}
