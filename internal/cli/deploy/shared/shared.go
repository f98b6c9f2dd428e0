// Package shared holds what the `hinic deploy` verbs share beyond
// cmdutil: reading a rack spec with the command line's overrides (deploy
// rack, deploy graph). The verbs import it rather than each other.
package shared

import (
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// LoadRack reads the spec (or takes the default rack) and applies the
// command-line overrides.
func LoadRack(spec, name, runDir, img string, pcap bool) (*deploy.Rack, error) {
	r := &deploy.Rack{}
	if spec != "" {
		var err error
		if r, err = deploy.ReadRack(spec); err != nil {
			return nil, cmdutil.UsageErrorf("%v", err)
		}
	}
	if name != "" {
		r.Name = name
	}
	if runDir != "" {
		r.RunDir = runDir
	}
	if img != "" {
		r.Image = img
	}
	if pcap {
		r.Pcap = true
	}
	if err := r.Defaults(); err != nil {
		return nil, cmdutil.UsageErrorf("%v", err)
	}
	return r, nil
}
