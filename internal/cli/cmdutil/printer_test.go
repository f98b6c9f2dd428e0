package cmdutil

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

type port struct {
	Port  int    `json:"port"`
	State string `json:"state"`
}

var ports = []port{{1, "up"}, {12, "down"}}

func writeRecords(t *testing.T, p *Printer) {
	t.Helper()
	w := p.Records("PORT", "STATE")
	for _, r := range ports {
		if err := w.Write(r, itoa(r.Port), r.State); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// hasEscapes reports whether s contains an ANSI escape or box drawing.
func hasEscapes(s string) bool {
	return strings.ContainsRune(s, '\x1b') || strings.ContainsAny(s, "─│╭╮╰╯┼├┤┬┴")
}

func TestRecordsPlainTable(t *testing.T) {
	var out bytes.Buffer
	writeRecords(t, NewPrinter(&out, FormatTable, false))
	want := "PORT  STATE\n" +
		"1     up\n" +
		"12    down\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("plain table (-want +got):\n%s", diff)
	}
}

func TestRecordsPlainNoTrailingSpaces(t *testing.T) {
	var out bytes.Buffer
	p := NewPrinter(&out, FormatTable, false)
	w := p.Records("NAME", "NOTE")
	w.Write(nil, "a", "")
	w.Write(nil, "longer", "x")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "NAME    NOTE\na\nlonger  x\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRecordsColorTable(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("NO_COLOR", "")
	t.Setenv("CLICOLOR_FORCE", "")
	var out bytes.Buffer
	writeRecords(t, NewPrinter(&out, FormatTable, true))
	s := out.String()
	if !strings.Contains(s, "\x1b[") {
		t.Errorf("styled table has no escape codes:\n%s", s)
	}
	if !strings.Contains(s, "╭") {
		t.Errorf("styled table has no border:\n%s", s)
	}
	for _, cell := range []string{"PORT", "STATE", "12", "down"} {
		if !strings.Contains(s, cell) {
			t.Errorf("styled table lacks %q:\n%s", cell, s)
		}
	}
}

func TestRecordsJSONLines(t *testing.T) {
	var out bytes.Buffer
	writeRecords(t, NewPrinter(&out, FormatJSON, true))
	want := `{"port":1,"state":"up"}` + "\n" + `{"port":12,"state":"down"}` + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("JSON lines (-want +got):\n%s", diff)
	}
}

func TestRecordsJSONStreams(t *testing.T) {
	// A JSON record is written when it arrives, before Close, so a
	// consumer of a long stream sees records as they happen.
	var out bytes.Buffer
	w := NewPrinter(&out, FormatJSON, false).Records("PORT")
	if err := w.Write(port{Port: 1}, "1"); err != nil {
		t.Fatal(err)
	}
	if out.Len() == 0 {
		t.Error("JSON record not written before Close")
	}
}

func TestRecordsErrors(t *testing.T) {
	w := NewPrinter(new(bytes.Buffer), FormatTable, false).Records("A", "B")
	if err := w.Write(nil, "only one"); err == nil {
		t.Error("Write with too few cells: no error")
	}
	w.Close()
	if err := w.Write(nil, "a", "b"); err == nil {
		t.Error("Write after Close: no error")
	}
}

func TestObject(t *testing.T) {
	v := struct {
		Version string `json:"version"`
		URL     string `json:"url"`
	}{"v1.0.0", "http://x/?a=1&b=<2>"}
	fields := []Field{{"version", "v1.0.0"}, {"url", v.URL}}

	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		if err := NewPrinter(&out, FormatJSON, false).Object(v, fields...); err != nil {
			t.Fatal(err)
		}
		want := "{\n  \"version\": \"v1.0.0\",\n  \"url\": \"http://x/?a=1&b=<2>\"\n}\n"
		if diff := cmp.Diff(want, out.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("plain", func(t *testing.T) {
		var out bytes.Buffer
		if err := NewPrinter(&out, FormatTable, false).Object(v, fields...); err != nil {
			t.Fatal(err)
		}
		want := "version  v1.0.0\nurl      http://x/?a=1&b=<2>\n"
		if diff := cmp.Diff(want, out.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("color", func(t *testing.T) {
		t.Setenv("TERM", "xterm-256color")
		t.Setenv("NO_COLOR", "")
		var out bytes.Buffer
		if err := NewPrinter(&out, FormatTable, true).Object(v, fields...); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "\x1b[") || !strings.Contains(out.String(), "v1.0.0") {
			t.Errorf("styled object:\n%q", out.String())
		}
	})
}

// TestPipedOutputHasNoEscapes drives the Factory as a command would, with
// Out not a terminal, NO_COLOR set, or --no-color given, and a hostile
// cell value.
func TestPipedOutputHasNoEscapes(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		noColor  string
		args     []string
	}{
		{name: "pipe", terminal: false},
		{name: "terminal with NO_COLOR", terminal: true, noColor: "1"},
		{name: "terminal with --no-color", terminal: true, args: []string{"--no-color"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("TERM", "xterm-256color")
			t.Setenv("NO_COLOR", tt.noColor)
			ios, _, out, _ := Test()
			ios.OutIsTerminal = tt.terminal
			f := NewFactory(ios, BuildInfo{})
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.Bool("no-color", false, "")
			f.BindFlag(KeyNoColor, fs.Lookup("no-color"))
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			p, err := f.Printer()
			if err != nil {
				t.Fatal(err)
			}
			writeRecords(t, p)
			if err := p.Object(nil, Field{"name", "evil\x1b[31mred\x1b[0m\ttab"}); err != nil {
				t.Fatal(err)
			}
			if hasEscapes(out.String()) {
				t.Errorf("output has escape codes or box drawing:\n%q", out.String())
			}
			if !strings.Contains(out.String(), `evil\x1b[31mred\x1b[0m\ttab`) {
				t.Errorf("control characters not shown escaped:\n%q", out.String())
			}
		})
	}
}

func TestFactoryPrinterFormat(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		want    Format
		wantErr string
	}{
		{name: "default", want: FormatTable},
		{name: "env json", env: "json", want: FormatJSON},
		{name: "env invalid", env: "yaml", wantErr: `invalid output format "yaml": valid formats are table, json, csv (set by HINIC_OUTPUT)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("HINIC_OUTPUT", tt.env)
			ios, _, _, _ := Test()
			f := NewFactory(ios, BuildInfo{})
			f.SetDefault(KeyOutput, string(FormatTable))
			p, err := f.Printer()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if ExitCode(err) != ExitUsage {
					t.Errorf("ExitCode = %d, want %d", ExitCode(err), ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Format() != tt.want {
				t.Errorf("Format() = %q, want %q", p.Format(), tt.want)
			}
		})
	}
}

func TestFormatFlag(t *testing.T) {
	for _, tt := range []struct {
		arg     string
		want    Format
		wantErr bool
	}{
		{"table", FormatTable, false},
		{"json", FormatJSON, false},
		{"yaml", "", true},
		{"JSON", "", true},
		{"", "", true},
	} {
		f := FormatTable
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		fs.VarP(&f, "output", "o", "")
		err := fs.Parse([]string{"--output=" + tt.arg})
		if (err != nil) != tt.wantErr {
			t.Errorf("--output=%s: err = %v, wantErr %v", tt.arg, err, tt.wantErr)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "valid formats are table, json, csv") {
				t.Errorf("--output=%s: error %q does not list the valid formats", tt.arg, err)
			}
			continue
		}
		if f != tt.want {
			t.Errorf("--output=%s: got %q, want %q", tt.arg, f, tt.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       "plain",
		"ünïcode ✓":   "ünïcode ✓",
		"a\tb\nc\r":   `a\tb\nc\r`,
		"\x1b[1mX":    `\x1b[1mX`,
		"nul\x00":     `nul\x00`,
		"c1 \u009b31": `c1 \u009b31`,
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPrinterCSV: records and a single result as CSV, values as they
// are (no sanitizing), quoted where CSV needs it.
func TestPrinterCSV(t *testing.T) {
	var buf bytes.Buffer
	p := NewPrinter(&buf, FormatCSV, true)
	w := p.Records("NAME", "NOTE")
	w.Write(nil, "vm-a", "a, b")
	w.Write(nil, "vm-b", "say \"hi\"")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "NAME,NOTE\nvm-a,\"a, b\"\nvm-b,\"say \"\"hi\"\"\"\n"; got != want {
		t.Errorf("records:\n%s\nwant\n%s", got, want)
	}
	buf.Reset()
	if err := p.Object(nil, Field{"version", "1.0"}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "name,value\nversion,1.0\n"; got != want {
		t.Errorf("object:\n%s\nwant\n%s", got, want)
	}
}
