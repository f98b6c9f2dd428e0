// Package graph implements `hinic deploy graph`.
package graph

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/shared"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/rackview"
	"github.com/PacketFive/hinic/internal/rackview/live"
)

// Views and formats.
var (
	Views   = []string{"front", "logical", "flows"}
	Formats = []string{"svg", "mermaid", "dot", "json", "text"}
)

// Options are the settings of one graph.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Color   func() bool
	Context context.Context

	Spec   string // rack spec; empty: the default rack, unless RunDir
	RunDir string // a deployed rack's run directory
	View   string
	Format string
	// FormatSet is true when --format was given; otherwise -o json
	// selects json.
	FormatSet bool
	Out       string // file to write; empty: standard output
	Serve     string // address of the live page; empty: draw once
	Interval  time.Duration
}

const long = `Draw a rack as an OCP Open Rack v3 (48 mm OU, 21-inch bay), from a
rack spec (SPEC, or the default two-VM rack without one) or from a
deployed rack (--run-dir, --rack: its state and counters, as hinic deploy
status reads them).

Each HiSwitch is the top-of-rack switch of one rack; switches joined by
links are racks side by side with a yellow inter-TOR cable. From the top:
the 1OU TOR, the 1OU HiLink switch (when the guests have GPUs), the 1OU
management host, eight 2OU blades (one guest each), 4OU of cable
management, the 2OU power shelf. LEDs are green when active, grey when
idle, red on a fault; RoCEv2 and InfiniBand ports are blue, HiLink ports
pink.

Views (--view):
  front     the racks from the front, with their cables
  logical   guests, NICs, GPUs, switches and links as a graph
  flows     the front view with a SEND crossing the racks and a HiLink
            copy staying in one, animated (SMIL; still under
            prefers-reduced-motion)

Formats (--format):
  svg       a self-contained SVG (every view)
  mermaid   a Mermaid flowchart of the logical view
  dot       a Graphviz graph of the logical view
  json      the drawing model (every view; -o json selects it too)
  text      the terminal front view, as in hinic deploy status

The output is deterministic: the same spec gives the same bytes.

--serve ADDR (with --run-dir or --rack) serves a live page of the
deployed rack instead: the front view, whose port LEDs, rates and
packets along the cables follow the fabric's counters, with tables of
the switch ports and of each guest's vNIC and QPs from the device
backend, pushed by Server-Sent Events every --interval. The page is
self-contained (nothing is fetched from the network) and keeps still
under prefers-reduced-motion. It runs until interrupted.`

// NewCmdGraph returns the `deploy graph` command; runF replaces the run in tests.
func NewCmdGraph(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer, Color: f.ColorEnabled}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "graph [SPEC]",
		Short: "Draw a rack (ORv3 front view, logical view, flows) as SVG, Mermaid, dot or JSON",
		Long:  long,
		Example: `  hinic deploy graph testdata/racks/two-hicain-gpu.yaml --out rack.svg
  hinic deploy graph testdata/racks/two-ib.yaml --view logical --format mermaid
  hinic deploy graph --rack hicain --format text
  hinic deploy graph testdata/racks/two-racks-gpu.yaml --view flows --out flows.svg
  hinic deploy graph --rack hicain --serve 127.0.0.1:8080`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Context = cmd.Context()
			if len(args) == 1 {
				opts.Spec = args[0]
			}
			if cmd.Flags().Changed("rack") {
				opts.RunDir = rackDir()
			}
			if opts.Spec != "" && opts.RunDir != "" {
				return cmdutil.UsageErrorf("give a SPEC or a deployed rack (--run-dir, --rack), not both")
			}
			if !slices.Contains(Views, opts.View) {
				return cmdutil.UsageErrorf("--view %q: want one of %v", opts.View, Views)
			}
			if !slices.Contains(Formats, opts.Format) {
				return cmdutil.UsageErrorf("--format %q: want one of %v", opts.Format, Formats)
			}
			opts.FormatSet = cmd.Flags().Changed("format")
			if opts.Serve != "" {
				if opts.RunDir == "" {
					return cmdutil.UsageErrorf("--serve shows a deployed rack: give --run-dir or --rack, not a spec")
				}
				if _, _, err := net.SplitHostPort(opts.Serve); err != nil {
					return cmdutil.UsageErrorf("--serve %q: want HOST:PORT, e.g. 127.0.0.1:8080", opts.Serve)
				}
				if opts.Interval <= 0 {
					return cmdutil.UsageErrorf("--interval %v: want a positive duration", opts.Interval)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	rackDir = cmdutil.RackFlags(fl, &opts.RunDir, deploy.DefaultRunDir)
	fl.StringVar(&opts.View, "view", "front", "what to draw: front, logical or flows")
	fl.StringVar(&opts.Format, "format", "svg", "svg, mermaid, dot, json or text")
	fl.StringVar(&opts.Out, "out", "", "write to `FILE` instead of standard output")
	fl.StringVar(&opts.Serve, "serve", "", "serve a live page of the deployed rack on `ADDR` (HOST:PORT) until interrupted")
	fl.DurationVar(&opts.Interval, "interval", live.DefaultInterval, "how often the live page's counters are read")
	_ = cmd.RegisterFlagCompletionFunc("view", cobra.FixedCompletions(Views, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(Formats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Model builds the drawing: from the spec, or from a deployed rack's
// state and status.
func Model(ctx context.Context, spec, runDir string) (*rackview.Model, error) {
	if runDir == "" {
		r, err := shared.LoadRack(spec, "", "", "", false)
		if err != nil {
			return nil, err
		}
		return rackview.FromSpec(r), nil
	}
	st, err := deploy.ReadState(runDir)
	if err != nil {
		return nil, err
	}
	rs, err := deploy.Status(ctx, runDir)
	if err != nil {
		return nil, err
	}
	return rackview.FromStatus(&st.Rack, rs), nil
}

// Render writes view in format.
func Render(w io.Writer, m *rackview.Model, view, format string, color bool) error {
	switch format {
	case "json":
		return rackview.JSON(w, m, view)
	case "mermaid", "dot":
		if view != "logical" {
			return cmdutil.UsageErrorf("--format %s draws the logical view: add --view logical", format)
		}
		if format == "mermaid" {
			return rackview.Mermaid(w, m)
		}
		return rackview.Dot(w, m)
	case "text":
		if view != "front" {
			return cmdutil.UsageErrorf("--format text draws the front view: use --view front, or svg for the %s view", view)
		}
		return rackview.Text(w, m, color)
	}
	switch view {
	case "logical":
		return rackview.LogicalSVG(w, m)
	case "flows":
		return rackview.FlowsSVG(w, m)
	}
	return rackview.FrontSVG(w, m)
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Serve != "" {
		return serve(ctx, opts)
	}
	if !opts.FormatSet {
		if p, err := opts.Printer(); err != nil {
			return err
		} else if p.Format() == cmdutil.FormatJSON {
			opts.Format = "json"
		}
	}
	m, err := Model(ctx, opts.Spec, opts.RunDir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	color := opts.Out == "" && opts.Color != nil && opts.Color()
	if err := Render(&b, m, opts.View, opts.Format, color); err != nil {
		return err
	}
	if opts.Out == "" {
		_, err := opts.IO.Out.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(opts.Out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("deploy graph: %w", err)
	}
	return nil
}

// serve runs the live page of a deployed rack until ctx ends.
func serve(ctx context.Context, opts *Options) error {
	st, err := deploy.ReadState(opts.RunDir)
	if err != nil {
		return err
	}
	srv := &live.Server{Model: rackview.FromSpec(&st.Rack), Source: live.RunDir{Rack: &st.Rack}, Interval: opts.Interval}
	return srv.Serve(ctx, opts.Serve, func(a net.Addr) {
		fmt.Fprintf(opts.IO.ErrOut, "deploy graph: rack %s live on http://%s/ (Ctrl-C stops)\n", st.Rack.Name, a)
	})
}
