package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func genMan(t *testing.T, dir string) {
	t.Helper()
	ios, _, _, errOut := cmdutil.Test()
	if code := Run(context.Background(), []string{"gen-man", "--dir", dir}, ios); code != 0 {
		t.Fatalf("gen-man: exit code %d, stderr:\n%s", code, errOut)
	}
}

func TestGenMan(t *testing.T) {
	isolate(t)
	t.Setenv("SOURCE_DATE_EPOCH", "31536000") // 1971-01-01
	dir1 := filepath.Join(t.TempDir(), "a", "man1")
	dir2 := filepath.Join(t.TempDir(), "man1")
	genMan(t, dir1)
	genMan(t, dir2)

	for _, name := range []string{"hinic.1", "hinic-version.1", "hinic-completion.1"} {
		a, err := os.ReadFile(filepath.Join(dir1, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir2, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between runs", name)
		}
		if !strings.Contains(string(a), `"Jan 1971"`) {
			t.Errorf("%s does not carry SOURCE_DATE_EPOCH's date:\n%s", name, firstLine(a))
		}
		if !strings.HasPrefix(string(a), ".nh") && !strings.Contains(string(a), ".TH ") {
			t.Errorf("%s is not a man page:\n%s", name, firstLine(a))
		}
	}
	if _, err := os.Stat(filepath.Join(dir1, "hinic-gen-man.1")); err == nil {
		t.Error("the hidden gen-man command got a man page")
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
