package cmdutil

import "github.com/spf13/pflag"

// RackFlags adds --rack NAME and --run-dir DIR to fs, the two ways the
// deploy verbs name a deployed rack, and returns the run directory they
// give: DIR when set, else dirOf(NAME) (NAME is rack0 unless given).
// Call it once the flags are parsed.
func RackFlags(fs *pflag.FlagSet, runDir *string, dirOf func(name string) string) func() string {
	name := fs.String("rack", "rack0", "rack `NAME` (its run directory is /tmp/hinic-rack-NAME)")
	fs.StringVar(runDir, "run-dir", "", "run directory of the rack (overrides --rack)")
	return func() string {
		if *runDir != "" {
			return *runDir
		}
		return dirOf(*name)
	}
}
