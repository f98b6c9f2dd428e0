// Package doctor implements `hinic doctor`: it lists the host tools that
// image building, rack deployment and the SSH gate need, and with --fix
// installs the missing ones through apt.
package doctor

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/image"
)

// Options are the settings of one doctor run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Fix     bool
}

// Check is one line of the doctor's report.
type Check struct {
	Tool    string `json:"tool"`
	Package string `json:"package"`
	Path    string `json:"path"`
	OK      bool   `json:"ok"`
	Purpose string `json:"purpose"`
}

// NewCmdDoctor returns the `doctor` command; runF replaces the run in tests.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check (and with --fix install) the host tools for images, racks and the SSH gate",
		Long: `List the host programs that hinic image build, hinic deploy and the SSH
gate need, the Debian package of each and whether it is installed. With
--fix, install the missing packages with apt-get (as root). Exits 3 when a
tool is still missing.`,
		Example: "  hinic doctor\n  sudo hinic doctor --fix",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Fix, "fix", false, "install missing packages with apt-get")
	return cmd
}

// Checks reports every tool.
func Checks() []Check {
	var out []Check
	for _, t := range image.Tools {
		c := Check{Tool: t.Name, Package: t.Package, Purpose: t.Purpose}
		if p, err := image.LookTool(t.Name); err == nil {
			c.Path, c.OK = p, true
		}
		out = append(out, c)
	}
	return out
}

func run(opts *Options) error {
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	if opts.Fix {
		var pkgs []string
		for _, c := range Checks() {
			if !c.OK {
				pkgs = append(pkgs, c.Package)
			}
		}
		if len(pkgs) > 0 {
			if os.Geteuid() != 0 {
				return fmt.Errorf("doctor: --fix needs root; run: sudo apt-get install %v", pkgs)
			}
			fmt.Fprintf(opts.IO.ErrOut, "doctor: installing %v\n", pkgs)
			for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)} {
				cmd := exec.Command("apt-get", args...)
				cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
				cmd.Stdout, cmd.Stderr = opts.IO.ErrOut, opts.IO.ErrOut
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("doctor: apt-get %s: %w", args[0], err)
				}
			}
		}
	}
	checks := Checks()
	missing := 0
	if printer.Format() == cmdutil.FormatJSON {
		if err := printer.Object(checks); err != nil {
			return err
		}
	} else {
		w := printer.Records("TOOL", "PACKAGE", "STATUS", "PATH", "NEEDED FOR")
		for _, c := range checks {
			st := "ok"
			if !c.OK {
				st = "missing"
			}
			if err := w.Write(c, c.Tool, c.Package, st, c.Path, c.Purpose); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	for _, c := range checks {
		if !c.OK {
			missing++
		}
	}
	if missing > 0 {
		return cmdutil.VerifyErrorf("%d tools missing; run `sudo hinic doctor --fix`", missing)
	}
	return nil
}
