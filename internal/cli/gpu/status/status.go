// Package status implements `hinic gpu status`: it asks a running GPU
// backend for its GPUs, memory, contexts and counters.
package status

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/gpu/shared"
	"github.com/PacketFive/hinic/internal/gpu"
)

// Options are the settings of one `hinic gpu status` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Control string
}

const long = `Show the state of a running GPU backend (hinic gpu serve): for every GPU
its guest connection and state (waiting for a guest, ready, live, fatal),
device memory used and total, the contexts and allocations the guest
holds, the commands in flight, the backend's counters (commands, errors,
kernels, bytes copied each way), the utilisation: the time the engines
spent executing over the backend's uptime (streams run concurrently, so it
may pass 100%), and for a GPU with a HiLink port (hilink=) the switch port,
whether it is up, the guest's peer operations and the bytes they moved,
and the bytes served to other GPUs.

The backend is found through its control socket (--control).`

// NewCmdStatus returns the `gpu status` command. runF replaces the work
// in tests; nil runs it.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	return cmdutil.NewCmd(f, &cobra.Command{
		Use:     "status",
		Short:   "Show GPUs, memory, contexts and counters of a running GPU backend",
		Long:    long,
		Example: "  hinic gpu status\n  hinic gpu status --control /tmp/rack1/gpu.sock -o json | jq '.gpus[].counters'",
	}, opts, func(v *viper.Viper) error {
		opts.Control = shared.ControlPath(v.GetString(shared.KeyControl))
		return nil
	}, runF, Run)
}

// Run queries the backend and prints its status.
func Run(ctx context.Context, opts *Options) error {
	query := func(ctx context.Context) (gpu.Status, error) { return gpu.QueryStatus(ctx, opts.Control) }
	return cmdutil.PrintStatus(ctx, opts.Printer, query, printTable)
}

// linkCell is a GPU's HiLink port: "-" without one, else its switch
// port, up or down, the peer operations and their bytes, and the bytes
// served to other GPUs.
func linkCell(l *gpu.LinkStatus) string {
	if l == nil {
		return "-"
	}
	state := "down"
	if l.Up {
		state = "up"
	}
	return fmt.Sprintf("port %d %s: %d ops, %s out, %s served", l.SwitchPort, state, l.Ops,
		cmdutil.BytesCell(l.BytesOut), cmdutil.BytesCell(l.BytesIn))
}

func printTable(p *cmdutil.Printer, st gpu.Status) error {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	bytes := cmdutil.BytesCell
	w := p.Records("GPU", "NAME", "GUEST", "STATE", "MEMORY", "CONTEXTS", "ALLOCS", "INFLIGHT",
		"COMMANDS", "ERRORS", "KERNELS", "H2D", "D2H", "D2D", "UTIL", "HILINK")
	for _, g := range st.GPUs {
		c := g.Counters
		if err := w.Write(g, strconv.Itoa(g.ID), g.Name, cmdutil.GuestCell(g.Guest, g.PeerID),
			cmdutil.StateCell(g.State, g.FatalCode),
			bytes(g.MemUsed)+" / "+bytes(g.MemSize), strconv.Itoa(g.Contexts), strconv.Itoa(g.Allocs),
			strconv.Itoa(g.Inflight), u(c.Commands), u(c.Errors), u(c.Kernels),
			bytes(c.BytesH2D), bytes(c.BytesD2H), bytes(c.BytesD2D),
			strconv.FormatFloat(100*g.Util, 'f', 1, 64)+"%", linkCell(g.Link)); err != nil {
			return err
		}
	}
	return w.Close()
}
