package fabric

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	per := int64(pcapRecordLen + len(frame))
	max := pcapHeaderLen + 10*per // ten frames a file
	c := &capture{path: filepath.Join(dir, "sw0-port1.pcap"), lt: linkTypeEthernet, max: max}
	if err := c.open(); err != nil {
		t.Fatal(err)
	}
	for range 25 {
		c.write(time.Unix(1, 0), frame)
	}
	c.close()
	for _, p := range []string{c.path, c.path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() > max {
			t.Errorf("%s: mode %04o, %d bytes (max %d)", p, fi.Mode().Perm(), fi.Size(), max)
		}
	}
	if c.rotated != 2 {
		t.Errorf("rotated %d times, want 2", c.rotated)
	}
	// 25 frames: 10 in the first file (gone), 10 in .1, 5 in the current.
	if n := countPackets(t, c.path+".1"); n != 10 {
		t.Errorf(".1 has %d frames", n)
	}
	if n := countPackets(t, c.path); n != 5 {
		t.Errorf("current has %d frames", n)
	}
}

// A frame larger than max still lands, alone in its file.
func TestCaptureOversizedFrame(t *testing.T) {
	c := &capture{path: filepath.Join(t.TempDir(), "p.pcap"), lt: linkTypeEthernet, max: 100}
	if err := c.open(); err != nil {
		t.Fatal(err)
	}
	c.write(time.Unix(1, 0), make([]byte, 500))
	c.write(time.Unix(1, 0), make([]byte, 500))
	c.close()
	if n := countPackets(t, c.path); n != 1 {
		t.Errorf("%d frames", n)
	}
	if n := countPackets(t, c.path+".1"); n != 1 {
		t.Errorf(".1: %d frames", n)
	}
}

func TestCaptureFollowsNoSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &capture{path: filepath.Join(dir, "sw0-port1.pcap"), lt: linkTypeEthernet, max: 1 << 20}
	if err := os.Symlink(victim, c.path); err != nil {
		t.Fatal(err)
	}
	if err := c.open(); err == nil {
		t.Error("opened through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim now %q", b)
	}
}
