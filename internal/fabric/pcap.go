package fabric

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// capture writes one port's frames, both directions, to a pcap file. A
// nil *capture does nothing. Safe for concurrent use (rx and tx write).
type capture struct {
	mu   sync.Mutex
	f    *os.File
	bw   *bufio.Writer
	w    *pcapgo.Writer
	dead bool // a write failed; stop trying
}

// openCapture creates the port's capture file in dir, if dir is set.
func (p *port) openCapture(dir string) error {
	if dir == "" || p.cap != nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fabric: pcap dir: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-port%d.pcap", p.sw.cfg.name, p.cfg.num))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("fabric: pcap: %w", err)
	}
	lt := linkTypeEthernet
	if p.cfg.link == LinkIB {
		lt = linkTypeUser0
	}
	c := &capture{f: f, bw: bufio.NewWriterSize(f, 256<<10)}
	c.w = pcapgo.NewWriterNanos(c.bw)
	if err := c.w.WriteFileHeader(captureSnapLen, lt); err != nil {
		f.Close()
		return fmt.Errorf("fabric: pcap %s: %w", path, err)
	}
	p.cap = c
	return nil
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
	ci := gopacket.CaptureInfo{Timestamp: now, CaptureLength: len(b), Length: len(b)}
	if err := c.w.WritePacket(ci, b); err != nil {
		c.dead = true
	}
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
