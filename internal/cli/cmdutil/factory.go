package cmdutil

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Factory carries what commands are built from. One Factory serves one
// invocation of hinic: it owns a fresh viper, so tests that build their
// own Factory share no state.
//
// Build the command tree (BindFlag, SetDefault) from one goroutine. Once
// a command runs, Config, Printer and the other readers may be called
// from several goroutines: the file is read once, and reads of the
// settings do not write.
type Factory struct {
	IOStreams *IOStreams
	Build     BuildInfo

	v          *viper.Viper
	loadOnce   sync.Once
	loadErr    error
	configFile string
}

// NewFactory returns a Factory writing to ios.
func NewFactory(ios *IOStreams, build BuildInfo) *Factory {
	f := &Factory{IOStreams: ios, Build: build, v: newViper()}
	// The defaults of the global settings hold even for a command tree
	// without the root's flags, as in tests of a single command.
	f.v.SetDefault(KeyOutput, string(FormatTable))
	return f
}

// BindFlag makes the setting key resolve from flag, the environment
// variable HINIC_<KEY>, the config file and the flag's default, in that
// order. Call it while building the command; read the value with
// Config().Get*(key) when the command runs.
//
// A nil flag is a mistake in the command's code (a misspelt Lookup), so
// BindFlag panics rather than leave the setting silently unbound.
func (f *Factory) BindFlag(key string, flag *pflag.Flag) {
	if flag == nil {
		panic("cmdutil: BindFlag(" + key + "): nil flag")
	}
	if err := f.v.BindPFlag(key, flag); err != nil {
		panic("cmdutil: BindFlag(" + key + "): " + err.Error())
	}
}

// SetDefault sets the value of key when no flag, environment variable or
// config file sets it, for settings that have no flag.
func (f *Factory) SetDefault(key string, value any) {
	f.v.SetDefault(key, value)
}

// Config returns the settings of this invocation, reading the config file
// on first use (after the command line has been parsed, since --config
// names it). A missing file in the search path is not an error; a file
// that cannot be read or parsed is, and the error names it.
func (f *Factory) Config() (*viper.Viper, error) {
	f.loadOnce.Do(func() {
		f.configFile, f.loadErr = loadConfigFile(f.v)
		if f.loadErr == nil && f.v.GetBool(KeyVerbose) {
			file := f.configFile
			if file == "" {
				file = "none"
			}
			f.newLogger(slog.LevelDebug).Debug("configuration", "file", file)
		}
	})
	return f.v, f.loadErr
}

// ConfigFile returns the path of the config file read, or "" if none was
// (or Config has not been called).
func (f *Factory) ConfigFile() string {
	_, _ = f.Config()
	return f.configFile
}

// Verbose reports whether --verbose (or HINIC_VERBOSE, or verbose: true in
// the config file) is in effect.
func (f *Factory) Verbose() bool {
	v, err := f.Config()
	return err == nil && v.GetBool(KeyVerbose)
}

// ColorEnabled reports whether output to Out may be styled: Out is a
// terminal, NO_COLOR (https://no-color.org) is unset or empty, and
// --no-color is not in effect.
func (f *Factory) ColorEnabled() bool {
	if !f.IOStreams.OutIsTerminal || os.Getenv("NO_COLOR") != "" {
		return false
	}
	v, err := f.Config()
	return err == nil && !v.GetBool(KeyNoColor)
}

// ErrColorEnabled is ColorEnabled for ErrOut, where drawings such as
// deploy status's front view go.
func (f *Factory) ErrColorEnabled() bool {
	if !f.IOStreams.ErrIsTerminal || os.Getenv("NO_COLOR") != "" {
		return false
	}
	v, err := f.Config()
	return err == nil && !v.GetBool(KeyNoColor)
}

// Printer returns the printer for the --output format in effect. An
// invalid format, wherever it was set, is a *UsageError.
func (f *Factory) Printer() (*Printer, error) {
	v, err := f.Config()
	if err != nil {
		return nil, err
	}
	format, err := ParseFormat(v.GetString(KeyOutput))
	if err != nil {
		// A bad --output fails while flags are parsed, so this value came
		// from the environment or the config file: say which.
		switch {
		case os.Getenv(EnvPrefix+"_OUTPUT") != "":
			err = fmt.Errorf("%w (set by %s_OUTPUT)", err, EnvPrefix)
		case f.configFile != "":
			err = fmt.Errorf("%w (set by config file %s)", err, f.configFile)
		}
		return nil, &UsageError{Err: err}
	}
	return NewPrinter(f.IOStreams.Out, format, f.ColorEnabled()), nil
}

// Logger returns a logger writing to ErrOut: debug records when verbose,
// info and above otherwise.
func (f *Factory) Logger() *slog.Logger {
	level := slog.LevelInfo
	if f.Verbose() {
		level = slog.LevelDebug
	}
	return f.newLogger(level)
}

func (f *Factory) newLogger(level slog.Level) *slog.Logger {
	return slog.New(newCLIHandler(f.IOStreams.ErrOut, level))
}

// newCLIHandler returns a text handler without timestamps: a person reads
// these lines as the command runs, and a timestamp per line is noise.
func newCLIHandler(w io.Writer, level slog.Level) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
}
