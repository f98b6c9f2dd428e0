package deploy

import (
	"encoding/json"
	"reflect"
	"strings"
)

// SchemaURI is the JSON Schema dialect of Schema.
const SchemaURI = "https://json-schema.org/draft/2020-12/schema"

// Schema returns the JSON Schema (draft 2020-12) of a rack spec, made
// from Rack's fields and SpecKeys: every key with its description, the
// enums of nic, link and accel, the patterns and bounds the loader
// checks, and no other keys. A spec read as JSON (YAML's data model)
// that ReadRack accepts validates against it; Defaults' checks across
// keys (an ip in the network, a port within the switch, one link layer
// per switch) are beyond it.
func Schema() map[string]any {
	s := objectSchema(reflect.TypeFor[Rack](), "")
	s["$schema"] = SchemaURI
	s["title"] = "HiNIC rack spec"
	s["description"] = "A rack of QEMU guests on HiSwitch, as hinic deploy rack reads it (docs/deploy.md). Every key is optional; an empty spec is the canonical two-VM rack."
	return s
}

// SchemaJSON returns Schema as indented JSON, with a final newline.
func SchemaJSON() []byte {
	b, err := json.MarshalIndent(Schema(), "", "  ")
	if err != nil {
		panic(err) // maps of strings, numbers and slices always marshal
	}
	return append(b, '\n')
}

func objectSchema(t reflect.Type, gen string) map[string]any {
	props := map[string]any{}
	for _, f := range specFields(t) {
		sub := f.Name
		if gen != "" {
			sub = gen + "." + f.Name
		}
		props[f.Name] = fieldSchema(f.Type, sub)
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// fieldSchema is the schema of the key at gen, of Go type t.
func fieldSchema(t reflect.Type, gen string) map[string]any {
	doc, _ := specKey(gen)
	var s map[string]any
	switch kindOf(t) {
	case kindMap:
		s = objectSchema(t, gen)
	case kindList:
		var items map[string]any
		if kindOf(t.Elem()) == kindMap {
			items = objectSchema(t.Elem(), gen+"[]")
		} else {
			items = scalarSchema(t.Elem(), doc)
		}
		s = map[string]any{"type": "array", "items": items}
	default:
		s = scalarSchema(t, doc)
	}
	if doc.Desc != "" {
		d := doc.Desc
		if doc.Default != "" {
			d += ". Default: " + strings.ReplaceAll(doc.Default, "`", "") + "."
		}
		s["description"] = d
	}
	return s
}

func scalarSchema(t reflect.Type, doc SpecKey) map[string]any {
	switch kindOf(t) {
	case kindInt:
		s := map[string]any{"type": "integer"}
		if doc.Bounded {
			s["minimum"], s["maximum"] = doc.Min, doc.Max
		}
		return s
	case kindBool:
		return map[string]any{"type": "boolean"}
	case kindDuration:
		return map[string]any{"type": "string", "pattern": durationPattern}
	}
	s := map[string]any{"type": "string"}
	if len(doc.Enum) > 0 {
		s["enum"] = append(append([]string{}, doc.Enum...), doc.Aliases...)
	}
	if doc.Pattern != "" {
		s["pattern"] = doc.Pattern
	}
	return s
}
