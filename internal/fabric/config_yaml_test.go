package fabric

import (
	"reflect"
	"strings"
	"testing"
)

// TestConfigYAMLTags: Config is read through mapstructure tags and
// written (by deploy, for hinic fabric serve --config) through yaml
// tags. Every field must carry both, under the same name, or what is
// written would not be what is read.
func TestConfigYAMLTags(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[Config]().PkgPath() || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			ms, ok := f.Tag.Lookup("mapstructure")
			if !ok {
				t.Errorf("%s.%s has no mapstructure tag", typ.Name(), f.Name)
				continue
			}
			want := ms + ",omitempty"
			if ms == "-" {
				want = "-"
			}
			if y := f.Tag.Get("yaml"); y != want {
				t.Errorf("%s.%s: yaml tag %q, want %q (mapstructure %q)", typ.Name(), f.Name, y, want, ms)
			}
			if ms != "-" && !strings.Contains(ms, ",") {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	if len(seen) < 9 {
		t.Errorf("walked %d config types, want Config and its 8 nested ones", len(seen))
	}
}

func TestPortSocket(t *testing.T) {
	if got := PortSocket("/run/x", "tor1", 12); got != "/run/x/tor1-port12.sock" {
		t.Errorf("PortSocket = %q", got)
	}
	c := Config{RunDir: "/run/x", Switches: []SwitchConfig{{Name: "sw7", Ports: 4}}}
	sws, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got := sws[0].ports[2].path; got != PortSocket("/run/x", "sw7", 3) {
		t.Errorf("the switch's port 3 listens at %q, not PortSocket's", got)
	}
}
