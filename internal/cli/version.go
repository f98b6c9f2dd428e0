package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// Set at link time by the Makefile and .goreleaser.yaml:
//
//	-X github.com/PacketFive/hinic/internal/cli.version=v1.2.3
//	-X github.com/PacketFive/hinic/internal/cli.commit=<full hash>
//	-X github.com/PacketFive/hinic/internal/cli.date=<RFC 3339>
//
// internal/release tests that these names exist.
var (
	version string
	commit  string
	date    string
)

// buildInfo describes this binary.
func buildInfo() cmdutil.BuildInfo {
	info, _ := debug.ReadBuildInfo()
	return resolveBuildInfo(version, commit, date, info)
}

// resolveBuildInfo prefers the linker-set values; without them (go build,
// go install, go test) it falls back to what the Go toolchain recorded:
// the module version for go install pkg@version, and the VCS revision and
// time when built inside a checkout with -buildvcs.
func resolveBuildInfo(version, commit, date string, info *debug.BuildInfo) cmdutil.BuildInfo {
	b := cmdutil.BuildInfo{
		Version:  version,
		Commit:   commit,
		Date:     date,
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info != nil {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		var revision, vcsTime string
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Commit == "" && revision != "" {
			b.Commit = revision
			if modified {
				b.Commit += "-dirty"
			}
		}
		if b.Date == "" {
			b.Date = vcsTime
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// VersionOptions are the inputs of `hinic version`.
type VersionOptions struct {
	Build   cmdutil.BuildInfo
	Printer func() (*cmdutil.Printer, error)
}

// NewCmdVersion returns `hinic version`. runF replaces versionRun in
// tests.
func NewCmdVersion(f *cmdutil.Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{Build: f.Build, Printer: f.Printer}
	return &cobra.Command{
		Use:   "version",
		Short: "Show the version, commit, build date, Go version and platform",
		Long: `Show the version, commit, build date, Go version and platform of this
binary. With --output json the result is an object with the keys version,
commit, date, go and platform.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
}

func versionRun(opts *VersionOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	b := opts.Build
	return p.Object(b,
		cmdutil.Field{Name: "version", Value: b.Version},
		cmdutil.Field{Name: "commit", Value: b.Commit},
		cmdutil.Field{Name: "date", Value: b.Date},
		cmdutil.Field{Name: "go", Value: b.Go},
		cmdutil.Field{Name: "platform", Value: b.Platform},
	)
}
