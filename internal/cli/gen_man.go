package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// GenManOptions are the inputs of `hinic gen-man`.
type GenManOptions struct {
	Root    *cobra.Command
	Dir     string
	Version string
}

// NewCmdGenMan returns the hidden `hinic gen-man --dir DIR`, which writes
// one man page per command (hinic.1, hinic-version.1, ...) for packaging.
// The page date is SOURCE_DATE_EPOCH when set, so builds are
// reproducible.
func NewCmdGenMan(f *cmdutil.Factory, runF func(*GenManOptions) error) *cobra.Command {
	opts := &GenManOptions{Version: f.Build.Version}
	cmd := &cobra.Command{
		Use:    "gen-man --dir DIR",
		Short:  "Write man pages for every command",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Root = cmd.Root()
			if runF != nil {
				return runF(opts)
			}
			return genManRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "write the pages into `DIR` (created if missing)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func genManRun(opts *GenManOptions) error {
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("gen-man: %w", err)
	}
	// cobra's "Auto generated" trailer would add a line that differs
	// between cobra versions; the header already names the source.
	disableAutoGenTag(opts.Root)
	err := doc.GenManTreeFromOpts(opts.Root, doc.GenManTreeOptions{
		Header: &doc.GenManHeader{
			Section: "1",
			Source:  "HiNIC " + opts.Version,
			Manual:  "HiNIC Manual",
		},
		Path:             opts.Dir,
		CommandSeparator: "-",
	})
	if err != nil {
		return fmt.Errorf("gen-man: %w", err)
	}
	return nil
}

func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
