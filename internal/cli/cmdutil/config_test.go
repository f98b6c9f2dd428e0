package cmdutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// newTestCommand returns a command shaped like a future `hinic fabric
// serve`: a global --config flag and a --ports flag bound to the
// namespaced key fabric.ports, default 1. Running it stores the resolved
// value in *ports.
func newTestCommand(f *Factory, ports *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "serve",
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.Config()
			if err != nil {
				return err
			}
			*ports = v.GetInt("fabric.ports")
			return nil
		},
	}
	cmd.PersistentFlags().String("config", "", "")
	f.BindFlag(KeyConfig, cmd.PersistentFlags().Lookup("config"))
	cmd.Flags().Int("ports", 1, "")
	f.BindFlag("fabric.ports", cmd.Flags().Lookup("ports"))
	return cmd
}

// isolate gives the test an empty working directory and config home, and
// clears the variables a developer's shell might set. It returns the
// working directory and the config home's hinic directory.
func isolate(t *testing.T) (wd, xdgDir string) {
	t.Helper()
	wd = t.TempDir()
	t.Chdir(wd)
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	// viper treats an empty variable as unset.
	for _, k := range []string{"HINIC_CONFIG", "HINIC_OUTPUT", "HINIC_NO_COLOR", "HINIC_VERBOSE", "HINIC_FABRIC_PORTS", "NO_COLOR"} {
		t.Setenv(k, "")
	}
	xdgDir = filepath.Join(xdg, "hinic")
	if err := os.MkdirAll(xdgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return wd, xdgDir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfigPrecedence(t *testing.T) {
	tests := []struct {
		name    string
		file    string // ./hinic.yaml, if not empty
		xdgFile string // $XDG_CONFIG_HOME/hinic/hinic.yaml, if not empty
		env     string // HINIC_FABRIC_PORTS
		args    []string
		want    int
	}{
		{name: "default", want: 1},
		{name: "xdg file beats default", xdgFile: "fabric:\n  ports: 5\n", want: 5},
		{name: "working dir file beats xdg file", file: "fabric:\n  ports: 2\n", xdgFile: "fabric:\n  ports: 5\n", want: 2},
		{name: "env beats file", file: "fabric:\n  ports: 2\n", env: "3", want: 3},
		{name: "flag beats env and file", file: "fabric:\n  ports: 2\n", env: "3", args: []string{"--ports", "4"}, want: 4},
		{name: "flag beats default", args: []string{"--ports", "4"}, want: 4},
		{name: "env beats default", env: "3", want: 3},
		{name: "flag equal to default still beats env", env: "3", args: []string{"--ports", "1"}, want: 1},
		{name: "other keys in file ignored", file: "output: json\ndevice:\n  ports: 9\n", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd, xdgDir := isolate(t)
			if tt.file != "" {
				writeFile(t, filepath.Join(wd, ConfigFileName), tt.file)
			}
			if tt.xdgFile != "" {
				writeFile(t, filepath.Join(xdgDir, ConfigFileName), tt.xdgFile)
			}
			t.Setenv("HINIC_FABRIC_PORTS", tt.env)

			ios, _, _, _ := Test()
			f := NewFactory(ios, BuildInfo{})
			var got int
			cmd := newTestCommand(f, &got)
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if got != tt.want {
				t.Errorf("fabric.ports = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestConfigExplicitFile(t *testing.T) {
	wd, xdgDir := isolate(t)
	writeFile(t, filepath.Join(wd, ConfigFileName), "fabric:\n  ports: 2\n")
	writeFile(t, filepath.Join(xdgDir, ConfigFileName), "fabric:\n  ports: 5\n")
	other := filepath.Join(t.TempDir(), "rack.yml")
	writeFile(t, other, "fabric:\n  ports: 7\n")

	for _, tt := range []struct {
		name string
		env  string
		args []string
	}{
		{name: "flag", args: []string{"--config", other}},
		{name: "env", env: other},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HINIC_CONFIG", tt.env)
			ios, _, _, _ := Test()
			f := NewFactory(ios, BuildInfo{})
			var got int
			cmd := newTestCommand(f, &got)
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if got != 7 {
				t.Errorf("fabric.ports = %d, want 7 from %s", got, other)
			}
			if f.ConfigFile() != other {
				t.Errorf("ConfigFile() = %q, want %q", f.ConfigFile(), other)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name     string
		file     string // ./hinic.yaml
		args     []string
		wantErr  []string // substrings
		wantCode int
	}{
		{
			name:     "explicit file missing",
			args:     []string{"--config", "missing.yaml"},
			wantErr:  []string{"missing.yaml", "does not exist"},
			wantCode: ExitError,
		},
		{
			name:     "malformed file names the file",
			file:     "fabric: [ports\n",
			wantErr:  []string{ConfigFileName, "not valid YAML"},
			wantCode: ExitError,
		},
		{
			name:     "wrong type for a key",
			file:     "fabric: 3\n",
			wantErr:  nil, // a scalar where a map is expected reads as unset
			wantCode: ExitOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd, _ := isolate(t)
			if tt.file != "" {
				writeFile(t, filepath.Join(wd, ConfigFileName), tt.file)
			}
			ios, _, _, _ := Test()
			f := NewFactory(ios, BuildInfo{})
			var got int
			cmd := newTestCommand(f, &got)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if code := ExitCode(err); code != tt.wantCode {
				t.Fatalf("ExitCode(%v) = %d, want %d", err, code, tt.wantCode)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestConfigSearchDirs(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/etc/xdg-test")
	if got, want := ConfigSearchDirs(), []string{".", "/etc/xdg-test/hinic"}; !equal(got, want) {
		t.Errorf("with XDG_CONFIG_HOME: %q, want %q", got, want)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/test")
	if got, want := ConfigSearchDirs(), []string{".", "/home/test/.config/hinic"}; !equal(got, want) {
		t.Errorf("with relative XDG_CONFIG_HOME: %q, want %q", got, want)
	}
}

func equal(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

func TestColorEnabled(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		noColor  string // NO_COLOR
		env      string // HINIC_NO_COLOR
		want     bool
	}{
		{name: "terminal", terminal: true, want: true},
		{name: "pipe", terminal: false, want: false},
		{name: "NO_COLOR", terminal: true, noColor: "1", want: false},
		{name: "HINIC_NO_COLOR", terminal: true, env: "true", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("NO_COLOR", tt.noColor)
			t.Setenv("HINIC_NO_COLOR", tt.env)
			ios, _, _, _ := Test()
			ios.OutIsTerminal = tt.terminal
			f := NewFactory(ios, BuildInfo{})
			if got := f.ColorEnabled(); got != tt.want {
				t.Errorf("ColorEnabled() = %v, want %v", got, tt.want)
			}
		})
	}
}
