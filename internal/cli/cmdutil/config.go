package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"
)

// Keys of the global settings, bound to the root command's persistent
// flags. Commands bind their own settings under a namespace named after
// their noun ("fabric.ports", "device.ram-file").
const (
	KeyConfig  = "config"
	KeyOutput  = "output"
	KeyNoColor = "no-color"
	KeyVerbose = "verbose"
)

const (
	// EnvPrefix prefixes the environment variable of every setting:
	// "fabric.ports" is read from HINIC_FABRIC_PORTS.
	EnvPrefix = "HINIC"
	// ConfigFileName is the config file looked for in the search path.
	ConfigFileName = "hinic.yaml"
)

// newViper returns a viper that resolves a key from, in order: a flag
// bound to it and set on the command line, the environment variable
// HINIC_<KEY> (dots and dashes become underscores), the config file once
// loaded, and the flag's default.
func newViper() *viper.Viper {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	v.SetConfigType("yaml")
	return v
}

// ConfigSearchDirs returns the directories searched, in order, for
// hinic.yaml when no file is named by --config or HINIC_CONFIG: the
// working directory, then $XDG_CONFIG_HOME/hinic (default
// ~/.config/hinic).
func ConfigSearchDirs() []string {
	dirs := []string{"."}
	// The XDG base directory spec says a relative XDG_CONFIG_HOME is
	// invalid and must be ignored.
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return append(dirs, filepath.Join(xdg, "hinic"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".config", "hinic"))
	}
	return dirs
}

// findConfigFile returns the config file to read, or "" when there is
// none. A file named explicitly must exist; one in the search path may be
// absent.
func findConfigFile(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("config file %s does not exist (named by --config or HINIC_CONFIG)", explicit)
			}
			return "", fmt.Errorf("config file %s: %w", explicit, err)
		}
		return explicit, nil
	}
	for _, dir := range ConfigSearchDirs() {
		path := filepath.Join(dir, ConfigFileName)
		_, err := os.Stat(path)
		if err == nil {
			// Absolute, so messages about it are clear wherever hinic ran.
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			return path, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("config file %s: %w", path, err)
		}
	}
	return "", nil
}

// loadConfigFile finds the config file and reads it into v. It returns
// the path read, or "" when there was no file.
func loadConfigFile(v *viper.Viper) (string, error) {
	path, err := findConfigFile(v.GetString(KeyConfig))
	if err != nil || path == "" {
		return "", err
	}
	v.SetConfigFile(path)
	if err := v.ReadInConfig(); err != nil {
		var parse viper.ConfigParseError
		if errors.As(err, &parse) {
			err = parse.Unwrap()
		}
		return "", fmt.Errorf("config file %s is not valid YAML: %w", path, err)
	}
	return path, nil
}
