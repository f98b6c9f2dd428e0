package fabric

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Link types of captures (tcpdump.org/linktypes.html). IB ports use
// USER0, which tshark reads as InfiniBand with the user_dlts setting of
// docs/fabric.md, as `hinic proto decode` does; LINKTYPE_INFINIBAND
// (247) is not understood by tshark 4.0.
const (
	linkTypeEthernet = layers.LinkTypeEthernet
	linkTypeUser0    = layers.LinkType(147)
	captureSnapLen   = 65535
)

// capture writes one port's frames, both directions, to a pcap file,
// mode 0600 (frames carry the guests' data), rotated at max bytes. A nil
// *capture does nothing. Safe for concurrent use (rx and tx write).
type capture struct {
	mu      sync.Mutex
	path    string
	lt      layers.LinkType
	max     int64 // bytes of one file, header included
	size    int64 // bytes written to the current file
	f       *os.File
	bw      *bufio.Writer
	w       *pcapgo.Writer
	rotated int  // files rotated out
	dead    bool // a write failed; stop trying
}

// pcapHeaderLen and pcapRecordLen are the sizes of a pcap file header
// and of a record header.
const (
	pcapHeaderLen = 24
	pcapRecordLen = 16
)

// openCapture creates the port's capture file in dir, if dir is set; max
// is the size at which it rotates.
func (p *port) openCapture(dir string, max int64) error {
	if dir == "" || p.cap != nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("fabric: pcap dir: %w", err)
	}
	lt := linkTypeEthernet
	if p.cfg.link == LinkIB {
		lt = linkTypeUser0
	}
	c := &capture{path: filepath.Join(dir, fmt.Sprintf("%s-port%d.pcap", p.sw.cfg.name, p.cfg.num)), lt: lt, max: max}
	if err := c.open(); err != nil {
		return err
	}
	p.cap = c
	return nil
}

// open starts c's file afresh: 0600, a symlink at its path not followed.
func (c *capture) open() error {
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("fabric: pcap: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("fabric: pcap: %w", err)
	}
	c.f, c.size = f, pcapHeaderLen
	if c.bw == nil {
		c.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		c.bw.Reset(f)
	}
	c.w = pcapgo.NewWriterNanos(c.bw)
	if err := c.w.WriteFileHeader(captureSnapLen, c.lt); err != nil {
		f.Close()
		return fmt.Errorf("fabric: pcap %s: %w", c.path, err)
	}
	return nil
}

// rotate moves the full file to PATH.1 and starts a new one.
func (c *capture) rotate() error {
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

func (c *capture) write(now time.Time, b []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	n := int64(pcapRecordLen + len(b))
	if c.max > 0 && c.size+n > c.max && c.size > pcapHeaderLen {
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

func (c *capture) flush() {
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

func (c *capture) close() {
	if c == nil {
		return
	}
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.f.Close()
	c.dead = true
}
