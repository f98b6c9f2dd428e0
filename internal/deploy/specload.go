package deploy

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// SpecError is a mistake in a rack spec: where it is (the file, the line
// and the key, such as guests[1].nic) and what is wrong. File and Line
// are empty for a spec built in Go; Key is empty for a YAML syntax error.
type SpecError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *SpecError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	default:
		b.WriteString("deploy: ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// specSource is where a rack spec came from: its file and the line of
// each key, by path ("guests[1].nic"; "guests[1]" is the item's line),
// so that Defaults can place its errors too.
type specSource struct {
	file string
	pos  map[string]int
	// budget is the nodes check may still visit: aliases let a small
	// file name a huge tree (the "billion laughs"), and check follows
	// them.
	budget *int
}

// maxSpecNodes bounds the nodes of a spec check visits, aliases
// expanded: far more than any rack has.
const maxSpecNodes = 100000

// errAt returns a SpecError at key, placed at the key's line or, for a
// key the file does not give, at the line of the nearest enclosing one.
func (s specSource) errAt(key, format string, args ...any) *SpecError {
	e := &SpecError{File: s.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	for k := key; k != "" && e.Line == 0; k = parentKey(k) {
		e.Line = s.pos[k]
	}
	return e
}

// parentKey strips the last element of a key: guests[1].nic gives
// guests[1], which gives guests.
func parentKey(k string) string {
	i := strings.LastIndexAny(k, ".[")
	if i < 0 {
		return ""
	}
	return k[:i]
}

var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// parseRack reads a spec: it checks the YAML node tree against Rack's
// fields first (unknown keys, value types, enums, patterns and bounds,
// each error with its line and key), then decodes it.
func parseRack(file string, b []byte) (*Rack, error) {
	budget := maxSpecNodes
	src := specSource{file: file, pos: map[string]int{}, budget: &budget}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		e := &SpecError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		return nil, e
	}
	r := &Rack{src: src}
	if len(doc.Content) == 0 {
		return r, nil // an empty spec: the canonical rack
	}
	root := doc.Content[0]
	if isNull(root) {
		return r, nil
	}
	if err := src.check(root, reflect.TypeFor[Rack](), "", ""); err != nil {
		return nil, err
	}
	if err := root.Decode(r); err != nil {
		// The check above accepts only what decodes; this is a bug.
		return nil, &SpecError{File: file, Msg: err.Error()}
	}
	r.src = src
	return r, nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// check checks node n against type t. key is the concrete path
// ("guests[1].nic"), gen the generic one SpecKeys uses ("guests[].nic").
func (s specSource) check(n *yaml.Node, t reflect.Type, key, gen string) *SpecError {
	if *s.budget--; *s.budget < 0 {
		return &SpecError{File: s.file, Line: n.Line, Key: key, Msg: "the spec is too large once its aliases are expanded"}
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	at := func(format string, args ...any) *SpecError {
		return &SpecError{File: s.file, Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if isNull(n) {
		return nil // an empty value: the default, as yaml leaves it
	}
	doc, _ := specKey(gen)
	switch kindOf(t) {
	case kindMap:
		if n.Kind != yaml.MappingNode {
			return at("want a mapping of keys (%s), not %s", strings.Join(fieldNames(t), ", "), describe(n))
		}
		fields := specFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub, subGen := k.Value, k.Value
			if key != "" {
				sub, subGen = key+"."+k.Value, gen+"."+k.Value
			}
			j := slices.IndexFunc(fields, func(f specField) bool { return f.Name == k.Value })
			if j < 0 {
				return &SpecError{File: s.file, Line: k.Line, Key: sub,
					Msg: fmt.Sprintf("unknown key (known here: %s)", strings.Join(fieldNames(t), ", "))}
			}
			if seen[k.Value] {
				return &SpecError{File: s.file, Line: k.Line, Key: sub, Msg: "given twice"}
			}
			seen[k.Value] = true
			s.pos[sub] = k.Line
			if err := s.check(v, fields[j].Type, sub, subGen); err != nil {
				return err
			}
		}
		return nil
	case kindList:
		if n.Kind != yaml.SequenceNode {
			return at("want a list, not %s", describe(n))
		}
		for i, item := range n.Content {
			sub := fmt.Sprintf("%s[%d]", key, i)
			s.pos[sub] = item.Line
			elemGen := gen + "[]"
			if kindOf(t.Elem()) != kindMap {
				elemGen = gen // a list of scalars: the list's own key documents them
			}
			if err := s.check(item, t.Elem(), sub, elemGen); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return at("want a single value, not %s", describe(n))
	}
	switch kindOf(t) {
	case kindInt:
		v, err := strconv.Atoi(n.Value)
		if n.Tag != "!!int" || err != nil {
			return at("%q is not a whole number", n.Value)
		}
		if doc.Bounded && (v < doc.Min || v > doc.Max) {
			return at("%d is out of range %d to %d", v, doc.Min, doc.Max)
		}
	case kindBool:
		if n.Tag != "!!bool" {
			return at("%q is not true or false", n.Value)
		}
	case kindDuration:
		if _, err := time.ParseDuration(n.Value); err != nil {
			return at("%q is not a duration such as 90s or 5m", n.Value)
		}
	case kindString:
		if len(doc.Enum) > 0 && !slices.Contains(doc.Enum, n.Value) && !slices.Contains(doc.Aliases, n.Value) {
			return at("%q is not one of %s", n.Value, strings.Join(doc.Enum, ", "))
		}
		if doc.Pattern != "" && !regexp.MustCompile(doc.Pattern).MatchString(n.Value) {
			return at("%q does not have the form %s", n.Value, patternHint(gen))
		}
	}
	return nil
}

// patternHint says in words what a patterned key looks like.
func patternHint(gen string) string {
	switch gen {
	case "links[].a", "links[].b":
		return "SWITCH:PORT (sw0:10)"
	case "guests[].files":
		return "LOCAL:REMOTE"
	case "metrics":
		return "host:port (127.0.0.1:9464)"
	}
	return "of " + gen
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for _, f := range specFields(t) {
		out = append(out, f.Name)
	}
	return out
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// AsSpecError returns err's *SpecError, if it has one.
func AsSpecError(err error) (*SpecError, bool) {
	var se *SpecError
	ok := errors.As(err, &se)
	return se, ok
}
