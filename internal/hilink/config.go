package hilink

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// Named defaults and limits of the switch.
const (
	// DefaultPorts is the port count of a switch: HiLink ports 0..7.
	DefaultPorts = 8
	// MaxPorts bounds Config.Ports.
	MaxPorts = 64
	// DefaultCredits is the frames each port's peer is granted: the
	// switch holds at most this many frames received on one port.
	DefaultCredits = 64
	// MaxCredits bounds Config.Credits.
	MaxCredits = 4096
	// DefaultMaxFrame is the largest frame, header included: 64 KiB of
	// payload.
	DefaultMaxFrame = wire.HeaderSize + 64<<10
	// DefaultIOBatch is the frames one recvmmsg or sendmmsg moves.
	DefaultIOBatch = 32
	// ControlSocketName is the control socket in the run directory.
	ControlSocketName = "hilink.sock"
	// DefaultPcapMax is the size at which a port's capture rotates.
	DefaultPcapMax = 256 << 20
	// LinkTypeHiLink is the link type of HiLink captures:
	// LINKTYPE_USER1 (HiSwitch's IB ports take USER0). Each record is one
	// message from the first byte of the HiLink header.
	LinkTypeHiLink = 148
)

// Config is a switch's configuration. The zero value of a field means
// its default.
type Config struct {
	// RunDir holds the port and control sockets; created with mode 0770.
	RunDir string `mapstructure:"run-dir"`
	// Ports is the number of ports, numbered from 0.
	Ports int `mapstructure:"ports"`
	// Credits is the frames granted to each port's peer.
	Credits int `mapstructure:"credits"`
	// MaxFrame is the largest frame, header included, the switch takes.
	MaxFrame int `mapstructure:"max-frame"`
	// IOBatch is the frames of one recvmmsg or sendmmsg.
	IOBatch int `mapstructure:"io-batch"`
	// Pcap, if set, is a directory (created 0700) where each port
	// writes hilink-port<N>.pcap with every message it receives and
	// sends.
	Pcap string `mapstructure:"pcap"`
	// PcapMax is the size at which a port's capture rotates.
	PcapMax int64 `mapstructure:"-"`
	// Logger gets the switch's logs; nil discards them.
	Logger *slog.Logger `mapstructure:"-"`
}

// withDefaults returns c with defaults filled in, or an error naming a
// bad setting.
func (c Config) withDefaults() (Config, error) {
	if c.RunDir == "" {
		return c, fmt.Errorf("hilink: no run directory")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Ports, DefaultPorts)
	def(&c.Credits, DefaultCredits)
	def(&c.MaxFrame, DefaultMaxFrame)
	def(&c.IOBatch, DefaultIOBatch)
	if c.PcapMax == 0 {
		c.PcapMax = DefaultPcapMax
	}
	switch {
	case c.Ports < 1 || c.Ports > MaxPorts:
		return c, fmt.Errorf("hilink: ports %d: want 1..%d", c.Ports, MaxPorts)
	case c.Credits < 1 || c.Credits > MaxCredits:
		return c, fmt.Errorf("hilink: credits %d: want 1..%d", c.Credits, MaxCredits)
	case c.MaxFrame < wire.MinMaxFrame || c.MaxFrame > wire.MaxMaxFrame:
		return c, fmt.Errorf("hilink: max-frame %d: want %d..%d", c.MaxFrame, wire.MinMaxFrame, wire.MaxMaxFrame)
	case c.IOBatch < 1 || c.IOBatch > 1024:
		return c, fmt.Errorf("hilink: io-batch %d: want 1..1024", c.IOBatch)
	case c.PcapMax < 1<<20:
		return c, fmt.Errorf("hilink: pcap-max %d: want at least 1 MiB", c.PcapMax)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// PortPath returns the socket of port num in runDir.
func PortPath(runDir string, num int) string {
	return filepath.Join(runDir, "hilink-port"+strconv.Itoa(num)+".sock")
}
