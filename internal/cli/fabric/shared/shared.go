// Package shared holds what runs a fabric from the settings, for every
// command that does: `hinic fabric serve` and `hinic fabric status` (the
// run directory), and `hinic device serve --fabric`, which serves the
// fabric in its own process. The commands import it rather than each
// other.
package shared

import (
	"errors"
	"log/slog"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/fabric"
)

// Setting keys (docs/fabric.md has the whole schema under "fabric").
// KeyRunDir is bound to the --run-dir flag of the fabric noun, which
// serve and status share; the others are fabric serve's flags.
const (
	KeyRunDir  = "fabric.run-dir"
	KeyPorts   = "fabric.ports"
	KeyPcap    = "fabric.pcap"
	KeyPcapMax = "fabric.pcap-max"
	KeyPprof   = "fabric.pprof"
	KeyMetrics = "fabric.metrics"
)

// LoadConfig reads the fabric section of the settings. Unknown keys are
// an error, so that a misspelt setting does not pass unnoticed.
func LoadConfig(v *viper.Viper) (fabric.Config, error) {
	// The settings of the fabric section that are the command's, not
	// the fabric's, beside the fabric's own.
	var all struct {
		fabric.Config `mapstructure:",squash"`
		Pprof         string `mapstructure:"pprof"`
		Metrics       string `mapstructure:"metrics"`
	}
	hook := viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.TextUnmarshallerHookFunc(),
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	))
	strict := func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }
	if v.IsSet("fabric") {
		if err := v.UnmarshalKey("fabric", &all, hook, strict); err != nil {
			return all.Config, cmdutil.UsageErrorf("fabric settings: %v (docs/fabric.md lists them)", err)
		}
	}
	c := all.Config
	c.RunDir = v.GetString(KeyRunDir)
	c.Ports = v.GetInt(KeyPorts)
	c.Pcap = v.GetString(KeyPcap)
	// Flag, environment, file, default: the flag's default is the
	// package default, so this always holds a value.
	if s := v.GetString(KeyPcapMax); s != "" {
		if err := c.PcapMax.UnmarshalText([]byte(s)); err != nil {
			return c, cmdutil.UsageErrorf("--pcap-max %q: %v", s, err)
		}
	}
	return c, nil
}

// Start starts fab's switches and logs where they serve: the run of
// `hinic fabric serve`, and of `hinic device serve --fabric`.
func Start(fab *fabric.Fabric, log *slog.Logger) error {
	if err := fab.Start(); err != nil {
		return err
	}
	ports := 0
	for _, sw := range fab.Switches() {
		ports += sw.NumPorts()
	}
	// Through the logger: port goroutines log to the same stream and
	// the handler serializes the writes.
	log.Info("HiSwitch serving", "switches", len(fab.Switches()), "ports", ports,
		"run_dir", fab.RunDir(), "status", "hinic fabric status --run-dir "+fab.RunDir())
	return nil
}

// Close closes fab (nil: nothing); a fabric already closed is no error.
func Close(fab *fabric.Fabric) error {
	if fab == nil {
		return nil
	}
	if err := fab.Close(); err != nil && !errors.Is(err, fabric.ErrClosed) {
		return err
	}
	return nil
}
