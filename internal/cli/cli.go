// Package cli is the hinic command tree: the root command, its global
// flags and configuration, and the mapping of errors to exit codes.
//
// Each command is one file of this package or one package under
// internal/cli/<noun>/<verb>; both build from a *cmdutil.Factory and are
// added to the tree in NewCmdRoot. What commands share (Factory,
// IOStreams, Printer, typed errors) is in internal/cli/cmdutil, which
// command packages import; this package imports them, never the reverse.
//
// The cli package may import the domain packages (deploy, verify, image,
// pkg, device, fabric, rdma, proto); none of them may import it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// Main runs hinic with the process's arguments (without the program name)
// and streams, and returns the exit code. SIGINT and SIGTERM cancel the
// command's context; a second signal kills the process as usual.
func Main(args []string) int {
	ctx, stop := signalContext()
	defer stop()
	return Run(ctx, args, cmdutil.System())
}

// signalContext returns a context cancelled by SIGINT or SIGTERM. Once
// the first signal has cancelled it, default handling is restored so that
// an impatient second Ctrl-C ends the process.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// Run runs hinic with args and streams and returns the exit code. Errors
// are written to ios.ErrOut prefixed "hinic: ".
func Run(ctx context.Context, args []string, ios *cmdutil.IOStreams) int {
	f := cmdutil.NewFactory(ios, buildInfo())
	return execute(ctx, f, NewCmdRoot(f), args)
}

// execute runs root with args and reports the outcome.
func execute(ctx context.Context, f *cmdutil.Factory, root *cobra.Command, args []string) int {
	prepareTree(root)
	root.SetArgs(args)
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		// A command that ends cleanly after a signal (a server shutting
		// down) succeeded.
		return cmdutil.ExitOK
	}
	code := exitCode(ctx, err)
	if cmd == nil {
		cmd = root
	}
	report(f.IOStreams, cmd, err, code)
	return code
}

// exitCode maps the error from cobra to an exit code. An error that did
// not come from a command's own code came from cobra's parsing of the
// command line (unknown command or flag, bad flag value, wrong number of
// arguments, missing required flag) and is a usage error.
func exitCode(ctx context.Context, err error) int {
	if ctx.Err() != nil {
		return cmdutil.ExitInterrupted
	}
	var re *runError
	if !errors.As(err, &re) {
		return cmdutil.ExitUsage
	}
	return cmdutil.ExitCode(re.err)
}

func report(ios *cmdutil.IOStreams, cmd *cobra.Command, err error, code int) {
	var re *runError
	if errors.As(err, &re) {
		err = re.err
	}
	if code == cmdutil.ExitInterrupted {
		fmt.Fprintln(ios.ErrOut, "hinic: interrupted")
		return
	}
	fmt.Fprintf(ios.ErrOut, "hinic: %s\n", strings.TrimRight(err.Error(), "\n"))
	if code == cmdutil.ExitUsage {
		fmt.Fprintf(ios.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
}

// runError marks an error returned by a command's own hooks, so that
// exitCode can tell it from one cobra produced while parsing.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// prepareTree readies the command tree for execute:
//   - every RunE-style hook is wrapped so its errors are marked runError;
//   - a command that only groups subcommands (a noun such as "fabric")
//     prints its help when called alone and rejects an unknown verb as a
//     usage error. Cobra does that for the root only; for other commands
//     it would print help and exit 0.
func prepareTree(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.RunE = groupRunE
	}
	for _, hook := range []*func(*cobra.Command, []string) error{
		&c.PersistentPreRunE, &c.PreRunE, &c.RunE, &c.PostRunE, &c.PersistentPostRunE,
	} {
		if *hook != nil {
			*hook = markRunErrors(*hook)
		}
	}
	for _, sub := range c.Commands() {
		prepareTree(sub)
	}
}

func markRunErrors(fn func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return &runError{err: err}
		}
		return nil
	}
}

func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cmdutil.UsageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}
