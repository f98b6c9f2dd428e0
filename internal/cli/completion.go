package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// CompletionOptions are the inputs of `hinic completion`.
type CompletionOptions struct {
	IO    *cmdutil.IOStreams
	Root  *cobra.Command
	Shell string
}

var completionShells = []string{"bash", "zsh", "fish", "powershell"}

// NewCmdCompletion returns `hinic completion SHELL`, which writes cobra's
// completion script for SHELL to standard output.
func NewCmdCompletion(f *cmdutil.Factory, runF func(*CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{IO: f.IOStreams}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Write a shell completion script",
		Long: `Write the completion script for a shell to standard output.

  bash:        source <(hinic completion bash)
               or save it as /usr/share/bash-completion/completions/hinic
  zsh:         hinic completion zsh > "${fpath[1]}/_hinic"
  fish:        hinic completion fish > ~/.config/fish/completions/hinic.fish
  powershell:  hinic completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             completionShells,
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Root = cmd.Root()
			opts.Shell = args[0]
			if runF != nil {
				return runF(opts)
			}
			return completionRun(opts)
		},
	}
}

func completionRun(opts *CompletionOptions) error {
	var gen func(io.Writer) error
	switch opts.Shell {
	case "bash":
		gen = func(w io.Writer) error { return opts.Root.GenBashCompletionV2(w, true) }
	case "zsh":
		gen = opts.Root.GenZshCompletion
	case "fish":
		gen = func(w io.Writer) error { return opts.Root.GenFishCompletion(w, true) }
	case "powershell":
		gen = opts.Root.GenPowerShellCompletionWithDesc
	default:
		return cmdutil.UsageErrorf("unsupported shell %q: valid shells are bash, zsh, fish, powershell", opts.Shell)
	}
	if err := gen(opts.IO.Out); err != nil {
		return fmt.Errorf("completion %s: %w", opts.Shell, err)
	}
	return nil
}
