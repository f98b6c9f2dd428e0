// Package godefs generates the Go mirrors of the device ABI headers in
// kernel/ (hicain_abi.h, higpu_abi.h) with `go tool cgo -godefs`, as
// golang.org/x/sys builds its ztypes_*.go files, and gives the fields Go
// names. It imports only the standard library; mkgodefs is its command,
// run by the packages' go:generate lines.
//
// The input is a Go file built only by the generator (//go:build
// ignore) whose cgo preamble includes the header, with one
// `type Go C.struct_c` per structure and one `Go = C.NAME` per
// constant. Each generated field keeps its C name in a `c:"name"` tag
// (testutil.CheckCABI reads it). A field's Go name is its C name in
// CamelCase with the ABI's initialisms upper-cased (abi_major ->
// ABIMajor, dbrec_gpa -> DBRecGPA); directives in the input adjust it:
//
//	//godefs:name c_name GoName      a Go name of its own
//	//godefs:blank pattern...         blank fields (`_`) whose C name, or
//	                                  Type.c_name, matches a path.Match
//	                                  pattern; a leading ! keeps a match
//
// An anonymous union comes out as its first member and padding: give
// such a union a byte array as its first member, or leave the structure
// to a hand-written view.
package godefs

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// initialisms are the C name parts written in capitals in Go.
var initialisms = map[string]string{
	"abi": "ABI", "ah": "AH", "bar": "BAR", "ca": "CA", "cq": "CQ", "cqe": "CQE",
	"d2d": "D2D", "d2h": "D2H", "dbrec": "DBRec", "dgid": "DGID", "dlid": "DLID",
	"dmac": "DMAC", "dtype": "DType", "eq": "EQ", "gid": "GID", "gpa": "GPA",
	"gpu": "GPU", "guid": "GUID", "h2d": "H2D", "hw": "HW", "id": "ID", "iova": "IOVA",
	"ipv4": "IPv4", "l2": "L2", "lid": "LID", "lkey": "LKey", "lmc": "LMC",
	"mac": "MAC", "mad": "MAD", "mr": "MR", "mtu": "MTU", "mw": "MW", "npages": "NPages",
	"ns": "NS", "pd": "PD", "pkey": "PKey", "pkeys": "PKeys", "psn": "PSN", "qkey": "QKey",
	"qp": "QP", "qp1": "QP1", "qpn": "QPN", "rkey": "RKey", "rnr": "RNR", "rq": "RQ",
	"sg": "SG", "sge": "SGE", "sgid": "SGID", "sl": "SL", "slid": "SLID", "sm": "SM",
	"sq": "SQ", "srq": "SRQ", "srqn": "SRQN", "tm": "TM", "va": "VA", "vl": "VL", "vl15": "VL15",
	"wc": "WC", "wqe": "WQE", "wr": "WR", "xrcd": "XRCD",
}

// GoName is the Go name of the C field name c by the rule above.
func GoName(c string) string {
	var b strings.Builder
	for _, p := range strings.Split(c, "_") {
		if s, ok := initialisms[p]; ok {
			b.WriteString(s)
		} else if p != "" {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	return b.String()
}

// options are the input's directives.
type options struct {
	names map[string]string
	blank []string
}

func (o *options) isBlank(typ, field string) bool {
	blank := false
	for _, p := range o.blank {
		keep := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		for _, name := range []string{field, typ + "." + field} {
			if ok, _ := path.Match(p, name); ok {
				blank = !keep
			}
		}
	}
	return blank
}

func parseOptions(src []byte) (*options, error) {
	o := &options{names: map[string]string{}}
	for _, l := range strings.Split(string(src), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "//godefs:name":
			if len(f) != 3 {
				return nil, fmt.Errorf("godefs: %q: want //godefs:name c_name GoName", l)
			}
			o.names[f[1]] = f[2]
		case "//godefs:blank":
			o.blank = append(o.blank, f[1:]...)
		}
	}
	return o, nil
}

// ctype matches the input's `type Go C.struct_name` declarations.
var ctype = regexp.MustCompile(`(?m)^type\s+(\w+)\s+C\.struct_(\w+)\s*$`)

// Generate runs cgo -godefs on input (a file name relative to dir) and
// returns the formatted Go source of the mirror.
func Generate(dir, input string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(dir, input))
	if err != nil {
		return nil, err
	}
	opts, err := parseOptions(src)
	if err != nil {
		return nil, err
	}
	goTypes := map[string]string{} // C struct name -> Go type
	for _, m := range ctype.FindAllStringSubmatch(string(src), -1) {
		goTypes[m[2]] = m[1]
	}
	tmp, err := os.MkdirTemp("", "godefs")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var stdout, stderr bytes.Buffer
	// cgo names its scratch objects by appending to -objdir, so the
	// directory needs its separator or they land beside it.
	cmd := exec.Command(goTool(), "tool", "cgo", "-godefs", "-objdir", tmp+string(filepath.Separator), input)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("godefs: go tool cgo -godefs %s: %v\n%s", input, err, stderr.Bytes())
	}
	cnames, err := cFields(dir, src, goTypes)
	if err != nil {
		return nil, err
	}
	return rewrite(stdout.Bytes(), input, opts, goTypes, cnames)
}

// preamble is the cgo comment above `import "C"`.
var preamble = regexp.MustCompile(`(?s)/\*(.*?)\*/\s*import "C"`)

// cFields lists the field names of each structure of goTypes as the C
// preprocessor expands them: cgo -godefs drops a prefix that fields
// share (page_list_gpa, page_shift -> list_gpa, shift), so its output
// cannot name them. An anonymous union counts as its first member, as
// cgo lays it out.
func cFields(dir string, src []byte, goTypes map[string]string) (map[string][]string, error) {
	m := preamble.FindSubmatch(src)
	if m == nil {
		return nil, fmt.Errorf("godefs: no cgo preamble")
	}
	cmd := exec.Command("gcc", "-E", "-P", "-")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(m[1])
	pp, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("godefs: gcc -E: %v", err)
	}
	out := map[string][]string{}
	for c := range goTypes {
		body, ok := structBody(string(pp), c)
		if !ok {
			return nil, fmt.Errorf("godefs: struct %s not found", c)
		}
		out[c] = topFields(body)
	}
	return out, nil
}

// structBody is the text between the braces of struct name's definition.
func structBody(src, name string) (string, bool) {
	loc := regexp.MustCompile(`struct\s+` + name + `\s*\{`).FindStringIndex(src)
	if loc == nil {
		return "", false
	}
	depth := 1
	for i := loc[1]; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[loc[1]:i], true
			}
		}
	}
	return "", false
}

// declName is the name a declaration declares: `__le32 rsvd1[6]` -> rsvd1.
var declName = regexp.MustCompile(`(\w+)\s*(\[[^\]]*\]\s*)*$`)

// topFields lists the names body declares, an anonymous union or
// structure standing for its first member.
func topFields(body string) []string {
	var names []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ';':
			if depth != 0 {
				continue
			}
			stmt := strings.TrimSpace(body[start:i])
			start = i + 1
			if open := strings.IndexByte(stmt, '{'); open >= 0 {
				close := strings.LastIndexByte(stmt, '}')
				if tail := strings.TrimSpace(stmt[close+1:]); tail != "" {
					stmt = tail // a named union or structure
				} else if inner := topFields(stmt[open+1 : close]); len(inner) > 0 {
					names = append(names, inner[0])
					continue
				}
			}
			if m := declName.FindStringSubmatch(stmt); m != nil {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// goTool is the go command of the toolchain that runs this code.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// rewrite gives the fields of cgo's output Go names and c tags, names
// nested structures by their Go types, and formats it.
func rewrite(out []byte, input string, opts *options, goTypes map[string]string, cnames map[string][]string) ([]byte, error) {
	cOf := map[string]string{} // Go type -> C struct name
	for c, g := range goTypes {
		cOf[g] = c
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", out, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("godefs: parse cgo output: %v", err)
	}
	var errs []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "_Ctype_struct_") {
				c := strings.TrimPrefix(id.Name, "_Ctype_struct_")
				if g, ok := goTypes[c]; ok {
					id.Name = g
				} else {
					errs = append(errs, fmt.Sprintf("struct %s has no `type X C.struct_%s` in %s", c, c, input))
				}
			}
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		fields := cnames[cOf[ts.Name.Name]]
		for _, fld := range st.Fields.List {
			for _, id := range fld.Names {
				var c string
				if !strings.HasPrefix(id.Name, "Pad_cgo_") && !strings.HasPrefix(id.Name, "Anon") {
					short := strings.ToLower(id.Name[:1]) + id.Name[1:]
					if len(fields) == 0 || !strings.HasSuffix(fields[0], short) {
						errs = append(errs, fmt.Sprintf("%s: field %s is not the next of struct %s", ts.Name.Name, id.Name, cOf[ts.Name.Name]))
						continue
					}
					c, fields = fields[0], fields[1:]
				}
				switch {
				case strings.HasPrefix(id.Name, "Pad_cgo_"):
					id.Name = "_"
				case strings.HasPrefix(id.Name, "Anon"):
					errs = append(errs, fmt.Sprintf("%s: an anonymous union or structure (%s) has no Go form", ts.Name.Name, id.Name))
				case opts.isBlank(ts.Name.Name, c):
					id.Name = "_"
				case opts.names[c] != "":
					id.Name = opts.names[c]
				default:
					id.Name = GoName(c)
				}
				if c != "" {
					fld.Tag = &ast.BasicLit{Kind: token.STRING, Value: "`c:" + strconv.Quote(c) + "`"}
				}
			}
		}
		return true
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("godefs: %s", strings.Join(errs, "; "))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by cmd/cgo -godefs and internal/godefs; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Input: %s (go generate runs internal/godefs/mkgodefs).\n\n", input)
	f.Comments = nil
	if err := format.Node(&b, fset, f); err != nil {
		return nil, err
	}
	// A blank line and a doc comment before each type.
	out = typeDecl.ReplaceAllFunc(b.Bytes(), func(m []byte) []byte {
		name := typeDecl.FindSubmatch(m)[1]
		return fmt.Appendf(nil, "\n// %s is struct %s.\n%s", name, cOf[string(name)], bytes.TrimPrefix(m, []byte("\n")))
	})
	return format.Source(out)
}

var typeDecl = regexp.MustCompile(`\ntype (\w+) struct`)
