package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// TestDocImages redraws every picture that docs_gen.go's go:generate
// lines write under docs/img and compares it with the file there.
func TestDocImages(t *testing.T) {
	f, err := os.Open("docs_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const prefix = "//go:generate go run ../../../../cmd/hinic "
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		args := strings.Fields(line)
		var out string
		var draw []string
		for i := 0; i < len(args); i++ {
			if args[i] == "--out" && i+1 < len(args) {
				out = args[i+1]
				i++
				continue
			}
			draw = append(draw, args[i])
		}
		if out == "" {
			t.Fatalf("go:generate line without --out: %s", line)
		}
		n++
		t.Run(out[strings.LastIndexByte(out, '/')+1:], func(t *testing.T) {
			ios, _, stdout, stderr := cmdutil.Test()
			if code := cli.Run(context.Background(), draw, ios); code != 0 {
				t.Fatalf("hinic %s: exit %d: %s", strings.Join(draw, " "), code, stderr)
			}
			want, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("%s is not current (%v): run `make docs-img` (go generate ./internal/cli/deploy/graph) and commit it", strings.TrimPrefix(out, "../../../../"), err)
			}
		})
	}
	if n < 4 {
		t.Errorf("docs_gen.go names %d pictures, want at least 4", n)
	}
}
