// Package pcapfile writes the per-port captures of HiNIC's switches
// (HiSwitch's and HiLink's ports): pcap files with nanosecond
// timestamps, mode 0600 (frames carry the guests' data), opened without
// following a symbolic link, and rotated at a size: the full file
// becomes PATH.1, replacing the one before, so a port keeps at most
// twice that.
//
// pcapfile imports nothing of the project, so that both switches share
// it without importing each other (ARCHITECTURE.md §2.7).
package pcapfile

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// HeaderLen and RecordLen are the sizes of a pcap file header and of a
// record header.
const (
	HeaderLen = 24
	RecordLen = 16
)

// File is one port's capture. A nil *File does nothing. Safe for
// concurrent use (a port's receive and transmit sides both write).
type File struct {
	mu      sync.Mutex
	path    string
	lt      layers.LinkType
	snapLen uint32
	max     int64 // bytes of one file, header included; 0: no rotation
	size    int64 // bytes written to the current file
	f       *os.File
	bw      *bufio.Writer
	w       *pcapgo.Writer
	rotated int  // files rotated out
	dead    bool // a write failed; stop trying
}

// Create starts a capture at path with link type lt and snapshot length
// snapLen, rotated at max bytes (0: never).
func Create(path string, lt layers.LinkType, snapLen uint32, max int64) (*File, error) {
	c := &File{path: path, lt: lt, snapLen: snapLen, max: max}
	if err := c.open(); err != nil {
		return nil, err
	}
	return c, nil
}

// Path returns the capture's path.
func (c *File) Path() string { return c.path }

// Rotated returns how many files were rotated out.
func (c *File) Rotated() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rotated
}

// open starts c's file afresh: 0600, a symlink at its path not followed.
func (c *File) open() error {
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("pcap: %w", err)
	}
	c.f, c.size = f, HeaderLen
	if c.bw == nil {
		c.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		c.bw.Reset(f)
	}
	c.w = pcapgo.NewWriterNanos(c.bw)
	if err := c.w.WriteFileHeader(c.snapLen, c.lt); err != nil {
		f.Close()
		return fmt.Errorf("pcap %s: %w", c.path, err)
	}
	return nil
}

// rotate moves the full file to PATH.1 and starts a new one.
func (c *File) rotate() error {
	if err := c.bw.Flush(); err != nil {
		return err
	}
	c.f.Close()
	if err := os.Rename(c.path, c.path+".1"); err != nil {
		return err
	}
	c.rotated++
	return c.open()
}

// Write records frame b seen at now. A failed write stops the capture
// (the switch goes on).
func (c *File) Write(now time.Time, b []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	n := int64(RecordLen + len(b))
	if c.max > 0 && c.size+n > c.max && c.size > HeaderLen {
		if err := c.rotate(); err != nil {
			c.dead = true
			return
		}
	}
	ci := gopacket.CaptureInfo{Timestamp: now, CaptureLength: len(b), Length: len(b)}
	if err := c.w.WritePacket(ci, b); err != nil {
		c.dead = true
		return
	}
	c.size += n
}

// Flush writes what is buffered to the file.
func (c *File) Flush() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		if err := c.bw.Flush(); err != nil {
			c.dead = true
		}
	}
}

// Close flushes and closes the file; later writes do nothing.
func (c *File) Close() {
	if c == nil {
		return
	}
	c.Flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		c.f.Close()
	}
	c.dead = true
}
