// Package exec implements `hinic deploy exec`: a command in a guest of a
// deployed rack, over the rack's SSH.
package exec

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one exec.
type Options struct {
	IO      *cmdutil.IOStreams
	Context context.Context
	RunDir  string
	Guest   string
	Command string
	// Uploads are LOCAL:REMOTE files copied to the guest before the
	// command runs.
	Uploads []string
}

// NewCmdExec returns the `deploy exec` command; runF replaces the run in
// tests.
func NewCmdExec(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "exec GUEST [--upload LOCAL:REMOTE]... [-- COMMAND [ARG...]]",
		Short: "Run a command in a guest of a deployed rack",
		Long: `Run a command in a guest of a rack started by hinic deploy rack, as root,
over the rack's SSH key and pinned host key. The words after -- are
joined with spaces and run by the guest's shell, so quote what the local
shell must not expand. Standard input is passed to the command; its
output streams back. The exit status is the command's (1 when it could
not be run).

--upload copies local files to the guest first (mode 0644); with only
uploads and no command, exec just copies.`,
		Example: `  hinic deploy exec vm-a -- ibv_devinfo -v
  hinic deploy exec --rack hicain vm-b -- 'dmesg | grep hicain'
  hinic deploy exec vm-b --upload dist/libhicain_0.1.0-1_amd64.deb:/root/libhicain.deb -- dpkg -i /root/libhicain.deb
  hinic deploy exec vm-a -- 'cat > /root/in.txt' < in.txt`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) == 0 || dash == 0 {
				return cmdutil.UsageErrorf("exec needs a GUEST")
			}
			if dash < 0 && len(args) > 1 {
				return cmdutil.UsageErrorf("put the command after --: hinic deploy exec %s -- %s", args[0], strings.Join(args[1:], " "))
			}
			if dash > 1 {
				return cmdutil.UsageErrorf("exec takes one GUEST before --, got %q", args[:dash])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Context = cmd.Context()
			opts.Guest = args[0]
			if d := cmd.ArgsLenAtDash(); d > 0 {
				opts.Command = strings.Join(args[d:], " ")
			}
			if opts.Command == "" && len(opts.Uploads) == 0 {
				return cmdutil.UsageErrorf("nothing to do: give a command after -- or --upload")
			}
			for _, u := range opts.Uploads {
				if l, r, ok := strings.Cut(u, ":"); !ok || l == "" || r == "" {
					return cmdutil.UsageErrorf("--upload %q: want LOCAL:REMOTE", u)
				}
			}
			opts.RunDir = rackDir()
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	rackDir = cmdutil.RackFlags(cmd.Flags(), &opts.RunDir, deploy.DefaultRunDir)
	cmd.Flags().StringArrayVar(&opts.Uploads, "upload", nil, "copy `LOCAL:REMOTE` to the guest first (repeatable)")
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := deploy.ReadState(opts.RunDir)
	if err != nil {
		return err
	}
	g := st.Guest(opts.Guest)
	if g == nil {
		var names []string
		for _, g := range st.Guests {
			names = append(names, g.Name)
		}
		return cmdutil.UsageErrorf("rack %s has no guest %q; its guests: %s", st.Rack.Name, opts.Guest, strings.Join(names, ", "))
	}
	c, err := st.Connect(ctx, g)
	if err != nil {
		return fmt.Errorf("ssh to %s (%s): %w", g.Name, g.SSHAddr, err)
	}
	defer c.Close()
	for _, u := range opts.Uploads {
		local, remote, _ := strings.Cut(u, ":")
		if err := c.Upload(ctx, local, remote, "0644"); err != nil {
			return fmt.Errorf("upload %s to %s:%s: %w", local, g.Name, remote, err)
		}
	}
	if opts.Command == "" {
		return nil
	}
	status, err := c.Exec(ctx, opts.Command, opts.IO.In, opts.IO.Out, opts.IO.ErrOut)
	if err != nil {
		return fmt.Errorf("%s: %w", g.Name, err)
	}
	if status != 0 {
		return &cmdutil.StatusError{Status: status, Err: fmt.Errorf("%s: `%s` exited %d", g.Name, opts.Command, status)}
	}
	return nil
}
