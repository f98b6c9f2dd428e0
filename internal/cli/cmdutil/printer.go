package cmdutil

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
	"github.com/muesli/termenv"
)

// Format is an --output format. *Format is a pflag.Value, so an invalid
// --output fails while flags are parsed.
type Format string

// The output formats.
const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	// FormatCSV is the table's cells as RFC 4180 CSV, a header row
	// first, for spreadsheets and scripts.
	FormatCSV Format = "csv"
)

// Formats lists the valid output formats, the default first.
var Formats = []Format{FormatTable, FormatJSON, FormatCSV}

// ParseFormat returns the Format named s, or an error listing the valid
// ones.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if Format(s) == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("invalid output format %q: valid formats are %s", s, formatList())
}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// String implements pflag.Value.
func (f *Format) String() string { return string(*f) }

// Set implements pflag.Value.
func (f *Format) Set(s string) error {
	v, err := ParseFormat(s)
	if err != nil {
		return fmt.Errorf("valid formats are %s", formatList())
	}
	*f = v
	return nil
}

// Type implements pflag.Value; help shows it as the flag's argument name.
func (f *Format) Type() string { return "format" }

// Printer writes a command's results in the --output format.
//
// JSON: a single result is an indented document; a stream of records is
// one compact object per line (JSON Lines), written as each arrives.
//
// Table: with colour, a lipgloss table with a styled header; without
// (Out is not a terminal, NO_COLOR, --no-color), plain columns aligned
// with spaces, with no escape codes and no box drawing, so the output can
// be piped to grep, awk or cut.
//
// CSV: the table's header and cells (a single result's fields as name,
// value rows), unstyled and unsanitized but quoted as RFC 4180 says.
//
// A Printer belongs to one goroutine.
type Printer struct {
	out    io.Writer
	format Format
	color  bool
}

// NewPrinter returns a Printer writing format to out; color allows
// styling in table output. Commands get theirs from Factory.Printer.
func NewPrinter(out io.Writer, format Format, color bool) *Printer {
	return &Printer{out: out, format: format, color: color}
}

// Format returns the output format.
func (p *Printer) Format() Format { return p.format }

// Field is one line of a single result printed as a table.
type Field struct {
	Name  string
	Value string
}

// Object prints a single result: v as an indented JSON document, or the
// fields as aligned name/value lines.
func (p *Printer) Object(v any, fields ...Field) error {
	if p.format == FormatJSON {
		enc := json.NewEncoder(p.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if p.format == FormatCSV {
		lines := [][]string{{"name", "value"}}
		for _, fl := range fields {
			lines = append(lines, []string{fl.Name, fl.Value})
		}
		return writeCSV(p.out, lines)
	}
	if !p.color {
		lines := make([][]string, len(fields))
		for i, fl := range fields {
			lines[i] = []string{sanitize(fl.Name), sanitize(fl.Value)}
		}
		return writeAligned(p.out, lines)
	}
	r := p.renderer()
	width := 0
	for _, fl := range fields {
		width = max(width, lipgloss.Width(sanitize(fl.Name)))
	}
	key := r.NewStyle().Bold(true).Foreground(lipgloss.Color("12")).Width(width + 2)
	var b strings.Builder
	for _, fl := range fields {
		b.WriteString(key.Render(sanitize(fl.Name)))
		b.WriteString(sanitize(fl.Value))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(p.out, b.String())
	return err
}

// Records starts a stream of records shown in a table with the given
// column headers. Close the RecordWriter to finish the stream.
func (p *Printer) Records(headers ...string) *RecordWriter {
	w := &RecordWriter{p: p, headers: headers}
	if p.format == FormatJSON {
		w.enc = json.NewEncoder(p.out)
		w.enc.SetEscapeHTML(false)
	}
	return w
}

// RecordWriter writes a stream of records. For JSON each record is
// written at once; a table needs every row to size its columns, so rows
// are kept until Close.
type RecordWriter struct {
	p       *Printer
	headers []string
	rows    [][]string
	enc     *json.Encoder
	closed  bool
}

// Write adds one record: v is its JSON form and row its table cells, one
// per header.
func (w *RecordWriter) Write(v any, row ...string) error {
	if w.closed {
		return fmt.Errorf("cmdutil: write to closed RecordWriter")
	}
	if w.enc != nil {
		return w.enc.Encode(v)
	}
	if len(row) != len(w.headers) {
		return fmt.Errorf("cmdutil: record has %d cells for %d columns", len(row), len(w.headers))
	}
	cells := make([]string, len(row))
	for i, c := range row {
		cells[i] = c
		if w.p.format != FormatCSV {
			cells[i] = sanitize(c) // CSV quotes what a cell holds instead
		}
	}
	w.rows = append(w.rows, cells)
	return nil
}

// Close renders the table, if any. It is safe to call more than once.
func (w *RecordWriter) Close() error {
	if w.closed || w.enc != nil {
		w.closed = true
		return nil
	}
	w.closed = true
	if w.p.format == FormatCSV {
		return writeCSV(w.p.out, append([][]string{w.headers}, w.rows...))
	}
	headers := make([]string, len(w.headers))
	for i, h := range w.headers {
		headers[i] = sanitize(h)
	}
	if !w.p.color {
		return writeAligned(w.p.out, append([][]string{headers}, w.rows...))
	}
	r := w.p.renderer()
	header := r.NewStyle().Bold(true).Foreground(lipgloss.Color("12")).Padding(0, 1)
	cell := r.NewStyle().Padding(0, 1)
	t := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(r.NewStyle().Foreground(lipgloss.Color("8"))).
		Headers(headers...).
		Rows(w.rows...).
		StyleFunc(func(row, _ int) lipgloss.Style {
			if row == table.HeaderRow {
				return header
			}
			return cell
		})
	_, err := fmt.Fprintln(w.p.out, t.Render())
	return err
}

// writeAligned writes lines of sanitized cells as columns separated by at
// least two spaces, without trailing spaces.
func writeAligned(out io.Writer, lines [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	for _, cells := range lines {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(buf.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func writeCSV(out io.Writer, lines [][]string) error {
	cw := csv.NewWriter(out)
	if err := cw.WriteAll(lines); err != nil {
		return err
	}
	return cw.Error()
}

// renderer returns a lipgloss renderer for Out. The Factory has already
// decided Out is a terminal that may be styled, so termenv is told so
// (Out may be any io.Writer) and only picks the colour depth from the
// environment.
func (p *Printer) renderer() *lipgloss.Renderer {
	return lipgloss.NewRenderer(p.out, termenv.WithTTY(true))
}

// sanitize makes s safe to print in a table cell: control characters,
// escape sequences included, are shown as Go escapes rather than sent to
// the terminal, and tabs or newlines cannot break the columns.
func sanitize(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
