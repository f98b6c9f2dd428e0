package cmdutil

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// NewCmd completes cmd (its Use, Short, Long and Example set) as a
// command that takes no arguments and runs in the package's shape: it
// reads the settings, load fills opts from them (a *UsageError for a bad
// one), then runF runs in tests, run otherwise.
func NewCmd[O any](f *Factory, cmd *cobra.Command, opts *O, load func(*viper.Viper) error,
	runF, run func(context.Context, *O) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		v, err := f.Config()
		if err != nil {
			return err
		}
		if err := load(v); err != nil {
			return err
		}
		if runF != nil {
			return runF(cmd.Context(), opts)
		}
		return run(cmd.Context(), opts)
	}
	return cmd
}

// Serve runs a server of a `serve` command until ctx is done: it serves
// Go's profiles on pprof (the --pprof flag) if set, then start starts
// the server and returns how to stop it, which Serve does once ctx is
// done.
func Serve(ctx context.Context, pprof string, log *slog.Logger, start func() (stop func() error, err error)) error {
	if pprof != "" {
		p, err := StartPprof(pprof, log)
		if err != nil {
			return err
		}
		defer p.Close()
	}
	stop, err := start()
	if err != nil {
		return err
	}
	<-ctx.Done()
	return stop()
}

// PrintStatus queries a running server's status and prints it: as one
// JSON document with --output json, else as the tables of table.
func PrintStatus[S any](ctx context.Context, printer func() (*Printer, error), query func(context.Context) (S, error),
	table func(*Printer, S) error) error {
	st, err := query(ctx)
	if err != nil {
		return err
	}
	p, err := printer()
	if err != nil {
		return err
	}
	if p.Format() == FormatJSON {
		return p.Object(st)
	}
	return table(p, st)
}

// NewGroup returns a noun's command with its verbs and one persistent
// flag (a string) that they all read, bound to key: one flag binds the
// setting once, where a key bound to a flag of each verb would follow
// only the last.
func NewGroup(f *Factory, use, short, flag, key, usage string, verbs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	cmd.PersistentFlags().String(flag, "", usage)
	f.BindFlag(key, cmd.PersistentFlags().Lookup(flag))
	cmd.AddCommand(verbs...)
	return cmd
}
