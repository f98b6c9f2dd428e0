// Package status implements `hinic deploy status`.
package status

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/rackview"
)

// Options are the settings of one status.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Color   func() bool // may the front view on ErrOut be coloured
	Context context.Context
	RunDir  string
}

// NewCmdStatus returns the `deploy status` command; runF replaces the run in tests.
func NewCmdStatus(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer, Color: f.ErrColorEnabled}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a deployed rack: guests, RDMA ports, switch ports, front view",
		Long: `Show a deployed rack: each guest (running, stopped, crashed or
unreachable; SSH address, data IP, RDMA device and its port state, asked
over SSH), each HiNIC vNIC of a rack with hicain guests (state, link and
counters, from the device backend's control socket), each GPU of a rack
whose guests have GPUs (memory, state, memory used, contexts and
utilisation, from the GPU backend's control socket) and each switch port
(state and counters, from the fabric's control socket), after a drawing of
the rack's front view (drawn as hinic deploy graph --format text does).
A crashed guest is shown as such; the others keep
running. -o json prints the whole status.`,
		Example: "  hinic deploy status\n  hinic deploy status -o json | jq '.guests[].port_state'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			opts.RunDir = rackDir()
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	rackDir = cmdutil.RackFlags(cmd.Flags(), &opts.RunDir, deploy.DefaultRunDir)
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	rs, err := deploy.Status(ctx, opts.RunDir)
	if err != nil {
		return err
	}
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(rs)
	}
	st, err := deploy.ReadState(opts.RunDir)
	if err != nil {
		return err
	}
	if err := FrontView(opts.IO.ErrOut, &st.Rack, rs, opts.Color != nil && opts.Color()); err != nil {
		return err
	}
	w := printer.Records("GUEST", "STATE", "PID", "ACCEL", "SSH", "DATA IP", "NIC", "RDMA", "PORT", "ERROR")
	for _, g := range rs.Guests {
		if err := w.Write(g, g.Name, g.State, fmt.Sprint(g.PID), g.Accel, g.SSH, g.DataIP, nicLabel(g), g.RDMADev, portLabel(g), g.Error); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	var domains []string
	for _, g := range rs.Guests {
		if g.Domain != "" {
			domains = append(domains, g.Name+" "+g.Domain)
		}
	}
	if len(domains) > 0 {
		fmt.Fprintf(opts.IO.Out, "libvirt domains: %s\n", strings.Join(domains, ", "))
	}
	if rs.Device != "" {
		fmt.Fprintln(opts.IO.Out)
		if len(rs.VNICs) == 0 {
			fmt.Fprintf(opts.IO.Out, "device backend: %s\n", rs.Device)
		} else {
			w := printer.Records("VNIC", "STATE", "LINK", "MAC", "QPS", "DOORBELLS", "L2 TX", "L2 RX", "ROCE RX", "FATAL")
			for _, v := range rs.VNICs {
				link := "down"
				if v.LinkUp {
					link = "up"
				}
				c := v.Counters
				if err := w.Write(v, v.Name, v.State, link, v.MAC, fmt.Sprint(len(v.QPs)), fmt.Sprint(c.Doorbells),
					fmt.Sprint(c.L2Tx), fmt.Sprint(c.L2Rx), fmt.Sprint(c.RoCERx), fmt.Sprint(c.Fatal)); err != nil {
					return err
				}
			}
			if err := w.Close(); err != nil {
				return err
			}
		}
	}
	if rs.GPU != "" {
		fmt.Fprintln(opts.IO.Out)
		if err := writeGPUs(printer, opts.IO.Out, rs); err != nil {
			return err
		}
	}
	if rs.Switches != nil {
		fmt.Fprintln(opts.IO.Out)
		w := printer.Records("SWITCH", "PORT", "KIND", "STATE", "RX FRAMES", "TX FRAMES", "RX BYTES", "TX BYTES")
		for _, s := range rs.Switches.Switches {
			for _, p := range s.Ports {
				if p.Kind == "" || (p.State != "up" && p.RxFrames == 0 && p.TxFrames == 0 && p.Kind == "seqpacket") {
					continue
				}
				if err := w.Write(p, s.Name, fmt.Sprint(p.Num), p.Kind, p.State, fmt.Sprint(p.RxFrames), fmt.Sprint(p.TxFrames),
					fmt.Sprint(p.RxBytes), fmt.Sprint(p.TxBytes)); err != nil {
					return err
				}
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

// FrontView draws the rack from the front, top to bottom in the order of
// an OCP ORv3 rack (rackview.Text: switches, the HiLink switch, the
// management host, 2OU guest blades, cable management, the power
// shelf), from the spec r and the status rs; color styles the LEDs and
// ports.
func FrontView(w io.Writer, r *deploy.Rack, rs *deploy.RackStatus, color bool) error {
	return rackview.Text(w, rackview.FromStatus(r, rs), color)
}

// writeGPUs prints the GPU backend's state and every guest's GPUs.
func writeGPUs(printer *cmdutil.Printer, out io.Writer, rs *deploy.RackStatus) error {
	fmt.Fprintf(out, "GPU backend: %s\n", rs.GPU)
	w := printer.Records("GUEST", "GPU", "MEMORY", "STATE", "USED", "CONTEXTS", "UTIL")
	for _, x := range rs.GPUs {
		state := x.State
		if x.Fatal != 0 {
			state = fmt.Sprintf("%s (code %d)", x.State, x.Fatal)
		}
		if err := w.Write(x, x.Guest, fmt.Sprint(x.ID), fmt.Sprintf("%d MiB", x.MemoryMiB), state,
			fmt.Sprintf("%.1f MiB", float64(x.MemUsed)/(1<<20)), fmt.Sprint(x.Contexts), fmt.Sprintf("%.0f%%", 100*x.Util)); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return writeHiLink(printer, out, rs)
}

// writeHiLink prints the HiLink switches and the GPU on each port.
func writeHiLink(printer *cmdutil.Printer, out io.Writer, rs *deploy.RackStatus) error {
	if len(rs.HiLink) == 0 {
		return nil
	}
	w := printer.Records("HILINK", "RACK", "STATE", "PORT", "PEER", "GPUS", "RX", "TX", "DROPS")
	for _, h := range rs.HiLink {
		if len(h.Ports) == 0 {
			if err := w.Write(h, h.Name, h.Rack, h.State, "-", "", "", "", "", ""); err != nil {
				return err
			}
			continue
		}
		for _, p := range h.Ports {
			if p.State != "up" && p.Counters.RxFrames == 0 {
				continue
			}
			if err := w.Write(h, h.Name, h.Rack, h.State, fmt.Sprintf("%d %s", p.Num, p.State), p.Peer, fmt.Sprint(p.GPUs),
				fmt.Sprint(p.Counters.RxFrames), fmt.Sprint(p.Counters.TxFrames), fmt.Sprint(p.Counters.DropsTotal())); err != nil {
				return err
			}
		}
	}
	return w.Close()
}

// guestGPUs lists a guest's GPUs for the front view: "0 live, 1 waiting".
func guestGPUs(rs *deploy.RackStatus, guest string) string {
	var parts []string
	for _, x := range rs.GPUs {
		if x.Guest == guest {
			parts = append(parts, fmt.Sprintf("%d %s", x.ID, x.State))
		}
	}
	return strings.Join(parts, ", ")
}

// nicLabel is a guest's NIC kind, with "/ib" for a native InfiniBand one.
func nicLabel(g deploy.GuestStatus) string {
	if g.Link == deploy.LinkIB {
		return g.NIC + "/ib"
	}
	return g.NIC
}

// portLabel is a guest's RDMA port state, with the LID of an InfiniBand
// port.
func portLabel(g deploy.GuestStatus) string {
	if g.LID != "" {
		return g.PortState + " LID " + g.LID
	}
	return g.PortState
}
