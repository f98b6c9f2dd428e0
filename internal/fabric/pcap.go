package fabric

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/PacketFive/hinic/internal/pcapfile"
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

// capture is one port's capture (package pcapfile: 0600, no symlink
// followed, rotated at max bytes). A nil *capture does nothing. Safe for
// concurrent use (rx and tx write).
type capture struct{ f *pcapfile.File }

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
	f, err := pcapfile.Create(filepath.Join(dir, fmt.Sprintf("%s-port%d.pcap", p.sw.cfg.name, p.cfg.num)), lt, captureSnapLen, max)
	if err != nil {
		return fmt.Errorf("fabric: %w", err)
	}
	p.cap = &capture{f: f}
	return nil
}

func (c *capture) write(now time.Time, b []byte) {
	if c != nil {
		c.f.Write(now, b)
	}
}

func (c *capture) flush() {
	if c != nil {
		c.f.Flush()
	}
}

func (c *capture) close() {
	if c != nil {
		c.f.Close()
	}
}
