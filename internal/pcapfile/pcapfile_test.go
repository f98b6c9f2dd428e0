package pcapfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func countPackets(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := 0
	for {
		_, _, err := r.ReadPacketData()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n++
	}
}

// A port's capture is private and bounded: 0600, rotated at max bytes
// into NAME.pcap.1, every file a valid pcap, never more than max.
func TestCaptureRotates(t *testing.T) {
	dir := t.TempDir()
	frame := bytes.Repeat([]byte{0xab}, 1000)
	per := int64(RecordLen + len(frame))
	max := HeaderLen + 10*per // ten frames a file
	c, err := Create(filepath.Join(dir, "sw0-port1.pcap"), layers.LinkTypeEthernet, 65535, max)
	if err != nil {
		t.Fatal(err)
	}
	for range 25 {
		c.Write(time.Unix(1, 0), frame)
	}
	c.Close()
	for _, p := range []string{c.Path(), c.Path() + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() > max {
			t.Errorf("%s: mode %04o, %d bytes (max %d)", p, fi.Mode().Perm(), fi.Size(), max)
		}
	}
	if c.Rotated() != 2 {
		t.Errorf("rotated %d times, want 2", c.Rotated())
	}
	// 25 frames: 10 in the first file (gone), 10 in .1, 5 in the current.
	if n := countPackets(t, c.Path()+".1"); n != 10 {
		t.Errorf(".1 has %d frames", n)
	}
	if n := countPackets(t, c.Path()); n != 5 {
		t.Errorf("current has %d frames", n)
	}
}

// A frame larger than max still lands, alone in its file.
func TestCaptureOversizedFrame(t *testing.T) {
	c, err := Create(filepath.Join(t.TempDir(), "p.pcap"), layers.LinkTypeEthernet, 65535, 100)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(time.Unix(1, 0), make([]byte, 500))
	c.Write(time.Unix(1, 0), make([]byte, 500))
	c.Close()
	if n := countPackets(t, c.Path()); n != 1 {
		t.Errorf("%d frames", n)
	}
	if n := countPackets(t, c.Path()+".1"); n != 1 {
		t.Errorf(".1: %d frames", n)
	}
}

func TestCaptureFollowsNoSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sw0-port1.pcap")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path, layers.LinkTypeEthernet, 65535, 1<<20); err == nil {
		t.Error("opened through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim now %q", b)
	}
}

func TestNilFileDoesNothing(t *testing.T) {
	var c *File
	c.Write(time.Now(), []byte{1})
	c.Flush()
	c.Close()
}
