// Package status implements `hinic link status`: it asks a running
// HiLink switch for its ports and counters through the control socket.
package status

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/link/shared"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/rundir"
)

// Options are the settings of one `hinic link status` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	RunDir  string
}

const long = `Show the state of a running HiLink switch (hinic link serve): for every
port its state (up with a peer, else down), the peer's name and GPU ids,
the credits the switch holds of the peer's grant, the frames it holds of
the port and has queued to it, frames and bytes each way, credit stalls
(times frames waited for the peer's credit) and drops by reason.

-o json prints the whole status, every counter included. The switch is
found through hilink.sock in the run directory.`

// NewCmdStatus returns the `link status` command. runF replaces the work
// in tests; nil runs it.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	return cmdutil.NewCmd(f, &cobra.Command{
		Use:     "status",
		Short:   "Show ports, credits and counters of a running HiLink switch",
		Long:    long,
		Example: "  hinic link status\n  hinic link status --run-dir /tmp/rack1 -o json | jq '.ports[] | {num, state, gpus}'",
	}, opts, func(v *viper.Viper) error {
		opts.RunDir = rundir.Dir(v.GetString(shared.KeyRunDir))
		return nil
	}, runF, Run)
}

// Run queries the switch and prints its status.
func Run(ctx context.Context, opts *Options) error {
	path := filepath.Join(opts.RunDir, hilink.ControlSocketName)
	query := func(ctx context.Context) (hilink.Status, error) { return hilink.QueryStatus(ctx, path) }
	return cmdutil.PrintStatus(ctx, opts.Printer, query, printTable)
}

func printTable(p *cmdutil.Printer, st hilink.Status) error {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	w := p.Records("PORT", "STATE", "PEER", "GPUS", "CREDITS", "HELD", "QUEUED", "RX FRAMES", "RX BYTES",
		"TX FRAMES", "TX BYTES", "STALLS", "DROPS")
	for _, ps := range st.Ports {
		peer, gpus, credits := "-", "-", "-"
		if ps.State == "up" {
			peer = ps.Peer
			var ids []string
			for _, g := range ps.GPUs {
				ids = append(ids, strconv.Itoa(g))
			}
			gpus = strings.Join(ids, ",")
			credits = fmt.Sprintf("%d/%d", ps.TxCredits, ps.PeerGrant)
		}
		c := ps.Counters
		if err := w.Write(ps, strconv.Itoa(ps.Num), ps.State, peer, gpus, credits, strconv.Itoa(ps.Held),
			strconv.Itoa(ps.Queued), u(c.RxFrames), u(c.RxBytes), u(c.TxFrames), u(c.TxBytes),
			u(c.CreditStalls), cmdutil.ReasonsCell(c.Drops)); err != nil {
			return err
		}
	}
	return w.Close()
}
