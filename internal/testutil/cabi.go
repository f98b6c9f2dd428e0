package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// CStruct pairs a Go mirror of a device ABI structure with the name of
// its C struct. Every field of V carries a `c:"name"` tag naming the C
// field.
type CStruct struct {
	C string
	V any
}

// goLayout lists "struct.field offset size" for every field of the Go
// mirrors, plus "struct sizeof N".
func goLayout(structs []CStruct) []string {
	var out []string
	for _, s := range structs {
		t := reflect.TypeOf(s.V)
		for i := range t.NumField() {
			f := t.Field(i)
			out = append(out, fmt.Sprintf("%s.%s %d %d", s.C, f.Tag.Get("c"), f.Offset, f.Type.Size()))
		}
		out = append(out, fmt.Sprintf("%s sizeof %d", s.C, t.Size()))
	}
	return out
}

// layoutProgram is a C program that includes header and prints the
// offset and size of every mirrored field and the value of every
// constant, in goLayout's format.
func layoutProgram(header string, structs []CStruct, consts map[string]int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#include <stddef.h>\n#include <stdio.h>\n#include %q\n", header)
	b.WriteString("#define F(s, f) printf(#s \".\" #f \" %zu %zu\\n\", offsetof(struct s, f), sizeof(((struct s *)0)->f))\n")
	b.WriteString("#define S(s) printf(#s \" sizeof %zu\\n\", sizeof(struct s))\n")
	b.WriteString("#define C(c) printf(#c \" %lld\\n\", (long long)(c))\n")
	b.WriteString("int main(void)\n{\n")
	for _, s := range structs {
		t := reflect.TypeOf(s.V)
		for i := range t.NumField() {
			fmt.Fprintf(&b, "\tF(%s, %s);\n", s.C, t.Field(i).Tag.Get("c"))
		}
		fmt.Fprintf(&b, "\tS(%s);\n", s.C)
	}
	keys := make([]string, 0, len(consts))
	for k := range consts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\tC(%s);\n", k)
	}
	b.WriteString("\treturn 0;\n}\n")
	return b.String()
}

// CheckCABI fails t when the C header kernel/<header> and its Go mirror
// drift: it builds a C program with gcc against the header that prints
// the offset and size of every field of structs and the value of every
// constant in consts, and compares them with Go's. It skips when gcc is
// missing (unless HINIC_REQUIRE_TOOLS=1).
func CheckCABI(t *testing.T, header string, structs []CStruct, consts map[string]int64) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	RequireTool(t, "gcc", "apt-get install gcc", err == nil)
	_, file, _, _ := runtime.Caller(0)
	inc := filepath.Join(filepath.Dir(file), "..", "..", "kernel")
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(src, []byte(layoutProgram(header, structs, consts)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(cc, "-std=gnu11", "-Wall", "-Werror", "-I", inc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	for _, l := range goLayout(structs) {
		k, v, _ := strings.Cut(l, " ")
		if got[k] != v {
			t.Errorf("%s: C %q, Go %q", k, got[k], v)
		}
	}
	for k, v := range consts {
		if got[k] != fmt.Sprint(v) {
			t.Errorf("%s: C %s, Go %d", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("C output:\n%s", bytes.TrimSpace(out))
	}
}
