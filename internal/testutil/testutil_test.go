package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCPIOLayout checks the newc framing: headers start with the magic,
// every member is 4-byte aligned, and the archive ends with the trailer.
func TestCPIOLayout(t *testing.T) {
	bb := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(bb, []byte("ELF-ish"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := BusyboxInitramfs(bb, "#!/bin/sh\necho hi\n", "proc")
	if err != nil {
		t.Fatal(err)
	}
	w.File("odd", 0o644, []byte("abc"))
	b := w.Bytes()
	if !bytes.HasPrefix(b, []byte("070701")) || len(b)%4 != 0 {
		t.Fatalf("archive of %d bytes starts %q", len(b), b[:6])
	}
	for _, want := range []string{"dev\x00", "bin/busybox\x00", "init\x00", "echo hi", "TRAILER!!!\x00"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("archive lacks %q", want)
		}
	}
	if n := bytes.Count(b, []byte("070701")); n != 9 { // dev bin proc console busybox sh init odd trailer
		t.Errorf("%d members, want 9", n)
	}
}
