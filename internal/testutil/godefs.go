package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"testing"

	"github.com/PacketFive/hinic/internal/godefs"
)

// CheckGodefs fails t when output, a file generated from input by the
// package's go:generate line (internal/godefs), is not what the
// generator makes of the header now: it regenerates into memory (cgo
// writes its scratch files to a temporary directory) and compares. It
// skips when gcc is missing (unless HINIC_REQUIRE_TOOLS=1).
func CheckGodefs(t *testing.T, input, output string) {
	t.Helper()
	_, err := exec.LookPath("gcc")
	RequireTool(t, "gcc", "apt-get install gcc", err == nil)
	want, err := godefs.Generate(".", input)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate in this package and commit it", output)
	}
}

// cNames are the names a header defines: object-like macros and
// enumerators.
var (
	cDefine = regexp.MustCompile(`(?m)^#\s*define\s+(\w+)[ \t]`)
	cEnum   = regexp.MustCompile(`(?s)\benum\s+\w*\s*\{(.*?)\}`)
	cEnumer = regexp.MustCompile(`(?m)^\s*(\w+)\s*[=,\n]`)
	comment = regexp.MustCompile(`(?s)/\*.*?\*/`)
)

// HeaderNames lists the macros (but function-like ones and the include
// guard) and enumerators of kernel/<header> whose names match prefix.
func HeaderNames(t *testing.T, header string, prefix *regexp.Regexp) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "kernel", header))
	if err != nil {
		t.Fatal(err)
	}
	text := comment.ReplaceAllString(string(src), "")
	var names []string
	for _, m := range cDefine.FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	for _, e := range cEnum.FindAllStringSubmatch(text, -1) {
		for _, m := range cEnumer.FindAllStringSubmatch(e[1]+"\n", -1) {
			names = append(names, m[1])
		}
	}
	guard := regexp.MustCompile(`(?m)^#ifndef\s+(\w+)`).FindStringSubmatch(text)
	return slices.DeleteFunc(names, func(n string) bool {
		return !prefix.MatchString(n) || (guard != nil && n == guard[1])
	})
}

// CheckCNames fails t on each name of kernel/<header> that matches
// prefix and that neither the godefs input maps (C.NAME) nor consts
// (CheckCABI's) compares.
func CheckCNames(t *testing.T, header string, prefix *regexp.Regexp, input string, consts map[string]int64) {
	t.Helper()
	src, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	names := HeaderNames(t, header, prefix)
	if len(names) == 0 {
		t.Fatalf("%s: no names match %s", header, prefix)
	}
	for _, n := range names {
		if _, ok := consts[n]; ok {
			continue
		}
		if !regexp.MustCompile(`\bC\.` + n + `\b`).Match(src) {
			t.Errorf("%s: %s is not mapped in Go: add it to %s (then go generate) or to the test's consts", header, n, input)
		}
	}
}
