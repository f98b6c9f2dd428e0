package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CheckStringer fails when the file a `//go:generate go tool stringer`
// directive of source (a file of the package under test) writes is not
// what that directive makes now: an enum changed and go generate was
// not run. The directive must name its output with -output. stringer
// comes through the tool directive of go.mod, from the module cache.
func CheckStringer(t *testing.T, source string) {
	t.Helper()
	src, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "//go:generate go tool stringer "
	var args []string
	for line := range strings.SplitSeq(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			args = strings.Fields(rest)
			break
		}
	}
	output := ""
	for i, a := range args {
		if a == "-output" && i+1 < len(args) {
			output = args[i+1]
			args = append(args[:i:i], args[i+2:]...)
			break
		}
	}
	if output == "" {
		t.Fatalf("%s has no %q directive with -output", source, prefix)
	}
	goBin, err := exec.LookPath("go")
	RequireTool(t, "go", "install Go", err == nil)
	tmp := filepath.Join(t.TempDir(), output)
	cmd := exec.Command(goBin, append(append([]string{"tool", "stringer"}, args...), "-output", tmp)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("go tool stringer: %v\n%s", err, out)
		RequireTool(t, "go tool stringer", "go mod download golang.org/x/tools", false)
	}
	want, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	// The header quotes the command line, with the temporary output.
	want = bytes.Replace(want, []byte(tmp), []byte(output), 1)
	got, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate %s and commit it", output, source)
	}
}
