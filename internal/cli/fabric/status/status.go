// Package status implements `hinic fabric status`: it asks a running
// fabric for its ports, FDB and LFT through the control socket.
package status

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/fabric/shared"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rundir"
)

// Options are the settings of one `hinic fabric status` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	RunDir  string
}

const long = `Show the state of a running fabric: for every switch its ports (state,
peer, link layer, frames and bytes each way, drops by reason, PFC frames
sent and received, ECN marks), its FDB and, for switches with InfiniBand
ports, the LFT the subnet manager programmed.

The fabric is found through control.sock in the run directory.`

// NewCmdStatus returns the `fabric status` command. runF replaces the
// work in tests; nil runs it.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	return cmdutil.NewCmd(f, &cobra.Command{
		Use:     "status",
		Short:   "Show ports, FDB and LFT of a running fabric",
		Long:    long,
		Example: "  hinic fabric status\n  hinic fabric status --run-dir /tmp/rack1 -o json | jq '.switches[].ports[] | {num, state, drops}'",
	}, opts, func(v *viper.Viper) error {
		opts.RunDir = rundir.Dir(v.GetString(shared.KeyRunDir))
		return nil
	}, runF, Run)
}

// Run queries the fabric and prints its status.
func Run(ctx context.Context, opts *Options) error {
	query := func(ctx context.Context) (*fabric.Status, error) { return fabric.QueryStatus(ctx, opts.RunDir) }
	return cmdutil.PrintStatus(ctx, opts.Printer, query, func(p *cmdutil.Printer, st *fabric.Status) error {
		return printTables(opts.IO.Out, p, st)
	})
}

func printTables(out io.Writer, p *cmdutil.Printer, st *fabric.Status) error {
	u := strconv.FormatUint
	for i, sw := range st.Switches {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "Switch %s  node GUID %s  aging %gs  lossless TCs %v\n\n", sw.Name, sw.NodeGUID, sw.AgingSecs, sw.Lossless)
		w := p.Records("PORT", "KIND", "LINK", "STATE", "TRANSPORT", "PEER", "RX FRAMES", "RX BYTES", "TX FRAMES", "TX BYTES", "DROPS", "PFC TX", "PFC RX", "ECN MARKS")
		for _, ps := range sw.Ports {
			peer := ps.Peer.Name
			if peer == "" {
				peer = "-"
			}
			transport := ps.Transport
			if transport == "" {
				transport = "-"
			}
			if err := w.Write(ps, strconv.Itoa(ps.Num), ps.Kind, ps.Link, ps.State, transport, peer,
				u(ps.RxFrames, 10), u(ps.RxBytes, 10), u(ps.TxFrames, 10), u(ps.TxBytes, 10),
				cmdutil.ReasonsCell(ps.Drops), u(ps.PFCSent, 10), u(ps.PFCRecv+ps.PauseRecv, 10), u(ps.ECNMarked, 10)); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := printTunnels(out, p, sw.Ports); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nFDB (%d entries)\n", len(sw.FDB))
		if len(sw.FDB) > 0 {
			w = p.Records("VLAN", "MAC", "PORT", "TYPE", "AGE")
			for _, e := range sw.FDB {
				kind, age := "dynamic", fmt.Sprintf("%.0fs", e.Age)
				if e.Static {
					kind, age = "static", "-"
				}
				if err := w.Write(e, strconv.Itoa(e.VLAN), e.MAC, strconv.Itoa(e.Port), kind, age); err != nil {
					return err
				}
			}
			if err := w.Close(); err != nil {
				return err
			}
		}
		if sw.IB != nil {
			fmt.Fprintf(out, "\nLFT (switch LID %d, %d LIDs routed)\n", sw.IB.LID, len(sw.IB.LFT))
			if len(sw.IB.LFT) > 0 {
				w = p.Records("LID", "PORT")
				for _, e := range sw.IB.LFT {
					if err := w.Write(e, strconv.Itoa(int(e.LID)), strconv.Itoa(e.Port)); err != nil {
						return err
					}
				}
				if err := w.Close(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// printTunnels prints the vxlan ports' tunnels, if the switch has any.
func printTunnels(out io.Writer, p *cmdutil.Printer, ports []fabric.PortStatus) error {
	var w *cmdutil.RecordWriter
	for _, ps := range ports {
		t := ps.Tunnel
		if t == nil {
			continue
		}
		if w == nil {
			fmt.Fprintf(out, "\nTunnels\n")
			w = p.Records("PORT", "ENCAP", "LOCAL", "REMOTE", "VNI", "LINK", "LAST SEEN", "RX DGRAMS", "TX DGRAMS", "BAD", "UNDERLAY DROPS", "TX ERRORS", "PAUSES")
		}
		seen := "never"
		if t.LastSeen >= 0 {
			seen = fmt.Sprintf("%.1fs", t.LastSeen)
		}
		link := t.Link
		if t.Error != "" {
			link = "error: " + t.Error
		}
		u := strconv.FormatUint
		if err := w.Write(t, strconv.Itoa(ps.Num), t.Encap, t.Local, t.Remote, strconv.FormatUint(uint64(t.VNI), 10), link, seen,
			u(t.RxDatagrams, 10), u(t.TxDatagrams, 10), cmdutil.ReasonsCell(t.Bad), u(t.UnderlayDrops, 10),
			u(t.TxErrors, 10), u(t.PausesSent, 10)); err != nil {
			return err
		}
	}
	if w == nil {
		return nil
	}
	return w.Close()
}
