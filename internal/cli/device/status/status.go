// Package status implements `hinic device status`: it asks a running
// device backend for its vNICs, QPs and counters.
package status

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/device/shared"
	"github.com/PacketFive/hinic/internal/device"
)

// Options are the settings of one `hinic device status` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Control string
}

const long = `Show the state of a running device backend (hinic device serve): for
every vNIC its guest connection and state (waiting for a guest, ready,
live, fatal), the verbs objects the guest holds, its QPs, the backend's
counters (doorbells, interrupts, admin commands, L2 frames, errors) and
the transport engine's counters. SPOOFED counts what the backend refused
of the guest for another's address: L2 frames with another source MAC or
an IPv4, ARP or IPv6 source the host did not pin (allow-ip=), and SET_ADDR
commands with such an address; --output json splits it (l2_tx_spoofed,
l2_tx_ip_spoofed, set_addr_refused) and lists the pins (allowed_ips).

The backend is found through its control socket (--control).`

// NewCmdStatus returns the `device status` command. runF replaces the
// work in tests; nil runs it.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	return cmdutil.NewCmd(f, &cobra.Command{
		Use:     "status",
		Short:   "Show vNICs, QPs and counters of a running device backend",
		Long:    long,
		Example: "  hinic device status\n  hinic device status --control /tmp/rack1/device.sock -o json | jq '.vnics[].counters'",
	}, opts, func(v *viper.Viper) error {
		opts.Control = shared.ControlPath(v.GetString(shared.KeyControl))
		return nil
	}, runF, Run)
}

// Run queries the backend and prints its status.
func Run(ctx context.Context, opts *Options) error {
	query := func(ctx context.Context) (device.Status, error) { return device.QueryStatus(ctx, opts.Control) }
	return cmdutil.PrintStatus(ctx, opts.Printer, query, func(p *cmdutil.Printer, st device.Status) error {
		return printTables(opts.IO.Out, p, st)
	})
}

func printTables(out io.Writer, p *cmdutil.Printer, st device.Status) error {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	w := p.Records("VNIC", "GUEST", "STATE", "MAC", "LINK", "PDS", "MRS", "CQS", "QPS", "DOORBELLS", "IRQS", "ADMIN", "ADMIN ERR", "L2 TX", "L2 RX", "SPOOFED", "WQE ERR", "FATAL")
	for _, v := range st.VNICs {
		link := "down"
		if v.LinkUp {
			link = "up"
			if v.FabricTransport != "" {
				link += " (" + v.FabricTransport + ")"
			}
		}
		c := v.Counters
		if err := w.Write(v, v.Name, cmdutil.GuestCell(v.Guest, v.PeerID), cmdutil.StateCell(v.State, v.FatalCode), v.MAC, link, strconv.Itoa(v.Objects.PDs),
			strconv.Itoa(v.Objects.MRs), strconv.Itoa(v.Objects.CQs), strconv.Itoa(v.Objects.QPs),
			u(c.Doorbells), u(c.Interrupts), u(c.AdminCmds), u(c.AdminErrors), u(c.L2Tx), u(c.L2Rx),
			u(c.Spoofed()), u(c.WQEErrors), u(c.Fatal)); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	for _, v := range st.VNICs {
		if len(v.QPs) == 0 {
			continue
		}
		fmt.Fprintf(out, "\nQPs of %s\n", v.Name)
		w := p.Records("QPN", "STATE", "SEND CQ", "RECV CQ", "SQ TAKEN", "RQ TAKEN", "FATAL")
		for _, q := range v.QPs {
			if err := w.Write(q, strconv.Itoa(int(q.QPN)), q.State, strconv.Itoa(int(q.SendCQ)),
				strconv.Itoa(int(q.RecvCQ)), u(uint64(q.SQCons)), u(uint64(q.RQCons)), strconv.FormatBool(q.Fatal)); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}
