package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// compileSchema compiles Schema with a draft 2020-12 validator.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("rack-spec.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("rack-spec.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// yamlToJSON reads YAML into JSON's data model, as an editor's YAML
// language server does before it validates.
func yamlToJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestSchemaValidatesExamples: every rack spec of testdata/racks
// validates against the schema.
func TestSchemaValidatesExamples(t *testing.T) {
	s := compileSchema(t)
	specs, err := filepath.Glob("../../testdata/racks/*.yaml")
	if err != nil || len(specs) == 0 {
		t.Fatalf("no specs: %v", err)
	}
	for _, p := range specs {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(yamlToJSON(t, b)); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
}

// TestSchemaRefuses: the schema refuses what the loader refuses, on
// the loader's own grounds (unknown keys, enums, types, patterns,
// bounds), and accepts the aliases the loader accepts.
func TestSchemaRefuses(t *testing.T) {
	s := compileSchema(t)
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"name: x\n", true},
		{"guests: [{name: a, nic: hicain, link: infiniband}]\n", true},
		{"guests: [{name: a, gpus: {count: 2, ids: [0, 7]}}]\nboot-timeout: 1m30s\n", true},
		{"links: [{a: 'sw0:10', b: 'sw1:10'}]\n", true},
		{"guets: []\n", false},
		{"guests: [{name: a, nic: foo}]\n", false},
		{"guests: [{name: a, link: fc}]\n", false},
		{"accel: hvf\n", false},
		{"guests: [{name: a, colour: blue}]\n", false},
		{"guests: [{name: a, gpus: {count: 9}}]\n", false},
		{"guests: [{name: a, gpus: {count: 1, mem: 64}}]\n", false},
		{"guests: [{name: a, memory: lots}]\n", false},
		{"pcap: yes please\n", false},
		{"boot-timeout: soon\n", false},
		{"links: [{a: sw0, b: 'sw1:10'}]\n", false},
		{"switches: {name: sw0}\n", false},
	} {
		err := s.Validate(yamlToJSON(t, []byte(tc.spec)))
		if (err == nil) != tc.ok {
			t.Errorf("%q: schema says %v, want ok=%v", tc.spec, err, tc.ok)
		}
		_, lerr := ParseRack([]byte(tc.spec))
		if (lerr == nil) != tc.ok {
			t.Errorf("%q: loader says %v, want ok=%v", tc.spec, lerr, tc.ok)
		}
	}
}

// TestSpecKeysCoverRack: SpecKeys documents every field of Rack and
// nothing else, so the schema, the loader and the docs see all keys.
func TestSpecKeysCoverRack(t *testing.T) {
	var paths []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, prefix string) {
		for _, f := range specFields(t) {
			p := prefix + f.Name
			paths = append(paths, p)
			switch kindOf(f.Type) {
			case kindMap:
				walk(f.Type, p+".")
			case kindList:
				if kindOf(f.Type.Elem()) == kindMap {
					walk(f.Type.Elem(), p+"[].")
				}
			}
		}
	}
	walk(reflect.TypeFor[Rack](), "")
	var documented []string
	for _, k := range SpecKeys {
		documented = append(documented, k.Path)
		if k.Desc == "" {
			t.Errorf("%s has no description", k.Path)
		}
	}
	for _, p := range paths {
		if !slices.Contains(documented, p) {
			t.Errorf("key %s is not in SpecKeys", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(paths, p) {
			t.Errorf("SpecKeys has %s, which is no key of Rack", p)
		}
	}
	if s := string(SchemaJSON()); !strings.Contains(s, `"enum": [`) || !strings.Contains(s, SchemaURI) {
		t.Errorf("schema lacks enums or $schema:\n%s", s)
	}
}

var updateDocs = flag.Bool("update", false, "rewrite docs/deploy.md's key table from SpecKeys and the golden domain XML in testdata/libvirt")

const (
	deployDoc = "../../docs/deploy.md"
	keysBegin = "<!-- rack spec keys: generated from deploy.SpecKeys by go test ./internal/deploy -update -->\n"
	keysEnd   = "<!-- end of rack spec keys -->\n"
)

// keyTable is docs/deploy.md's table of rack spec keys.
func keyTable() string {
	var b strings.Builder
	b.WriteString(keysBegin + "| key | default | meaning |\n|---|---|---|\n")
	for _, k := range SpecKeys {
		def := k.Default
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.Path, def, strings.ReplaceAll(k.Desc, "|", `\|`))
	}
	b.WriteString(keysEnd)
	return b.String()
}

// TestDocsKeyTable: docs/deploy.md's key table is SpecKeys, the source
// of the schema's descriptions (go test ./internal/deploy -update
// rewrites it).
func TestDocsKeyTable(t *testing.T) {
	doc, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(keysBegin)), bytes.Index(doc, []byte(keysEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated key table", deployDoc)
	}
	want := keyTable()
	if string(doc[i:j+len(keysEnd)]) == want {
		return
	}
	if !*updateDocs {
		t.Fatalf("%s's key table is out of date: go test ./internal/deploy -run TestDocsKeyTable -update", deployDoc)
	}
	out := append(append(slices.Clone(doc[:i]), want...), doc[j+len(keysEnd):]...)
	if err := os.WriteFile(deployDoc, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
