// Package decode implements `hinic proto decode`: it reads frames from a
// pcap or pcapng capture, or as hex, and prints one row per frame with the
// RoCEv2 / InfiniBand headers, their fields and whether the ICRC holds,
// or with the header of a HiLink message.
package decode

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/proto"
)

// Options are the settings of one `hinic proto decode` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)

	// Input is a capture or hex file; "" or "-" is standard input.
	Input string
	// Hex holds frames given with --hex; when set, Input is not read.
	Hex []string
	// Link is the link layer of hex frames: "ethernet", "ib" or
	// "hilink". With LinkSet, it also replaces a capture's user link type
	// (147-162).
	Link string
	// LinkSet says --link was given.
	LinkSet bool
	// Count stops after this many frames; 0 reads them all.
	Count int
	// CheckICRC fails the command (exit 3) when a transport frame's ICRC
	// (or VCRC) is bad, and prints a summary on standard error.
	CheckICRC bool
}

const long = `Decode RoCEv2 and native InfiniBand frames and check their ICRC, or
decode HiLink messages.

The input is a pcap or pcapng capture, or text with one frame per line in
hex (spaces, colons and a leading 0x are ignored; # starts a comment). It
is read from FILE, or from standard input when FILE is - or absent. Frames
may also be given on the command line with --hex.

Link types: Ethernet captures (link type 1) carry RoCEv2 and RoCEv1;
native InfiniBand captures use LINKTYPE_INFINIBAND (247), a user link type
(147 or 149-162, as tshark reads them with the user_dlts setting) or ERF
(197) records of type InfiniBand. Link type 148 (LINKTYPE_USER1) is
HiLink's: each record is one message between a GPU and the HiLink switch
(hinic link serve --pcap). Hex frames are Ethernet unless --link says
otherwise; --link also overrides a capture's user link type, for example
--link ib for an InfiniBand capture made with link type 148.

Every frame gets a row, even a malformed one (its error is shown); the
command fails only when the input cannot be read.`

const example = `  hinic proto decode capture.pcap
  hinic proto decode -o json capture.pcapng | jq 'select(.icrc_ok == false)'
  hinic proto decode --link ib --hex '0002 0001 ...'
  hinic proto decode pcap/hilink-port0.pcap
  tcpdump -w - -i veth0 udp port 4791 | hinic proto decode -`

// NewCmdDecode returns the `proto decode` command. runF replaces the work
// in tests; nil runs it.
func NewCmdDecode(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "decode [FILE]",
		Short:   "Decode RoCEv2, InfiniBand and HiLink frames from a capture or hex",
		Long:    long,
		Example: example,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Input = args[0]
			}
			if linkOf(opts.Link) == linkInvalid {
				return cmdutil.UsageErrorf("invalid --link %q: valid values are ethernet, ib, hilink", opts.Link)
			}
			opts.LinkSet = cmd.Flags().Changed("link")
			if opts.Count < 0 {
				return cmdutil.UsageErrorf("--count must not be negative")
			}
			if len(opts.Hex) > 0 && opts.Input != "" {
				return cmdutil.UsageErrorf("give either FILE or --hex, not both")
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.Hex, "hex", nil, "decode this hex `FRAME` (repeatable)")
	cmd.Flags().StringVar(&opts.Link, "link", "ethernet",
		"link layer of hex frames (ethernet, ib or hilink); given, it also overrides a capture's user link type (147-162)")
	cmd.Flags().IntVarP(&opts.Count, "count", "c", 0, "stop after `N` frames (0: all)")
	cmd.Flags().BoolVar(&opts.CheckICRC, "check-icrc", false, "exit 3 if any RoCE/IB frame has a bad ICRC or VCRC; print a summary")
	return cmd
}

func run(opts *Options) error {
	src, err := openSource(opts)
	if err != nil {
		return err
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	w := printer.Records(columns...)
	var sum summary
	for i := 1; opts.Count == 0 || i <= opts.Count; i++ {
		frame, link, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = w.Close()
			return fmt.Errorf("reading frame %d: %w", i, err)
		}
		r := Describe(i, frame, link)
		sum.add(&r)
		if err := w.Write(r, r.row()...); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if opts.CheckICRC {
		fmt.Fprintln(opts.IO.ErrOut, sum.String())
		if sum.badCRC > 0 {
			return cmdutil.VerifyErrorf("%d frames with a bad ICRC or VCRC", sum.badCRC)
		}
	}
	return nil
}

// summary counts what --check-icrc reports.
type summary struct{ frames, transport, badCRC, malformed, hilink int }

func (s *summary) add(r *Record) {
	s.frames++
	if r.HiLink != nil {
		s.hilink++
	}
	if r.Error != "" {
		s.malformed++
	}
	if r.ICRCOK != nil {
		s.transport++
		if !*r.ICRCOK || (r.VCRCOK != nil && !*r.VCRCOK) {
			s.badCRC++
		}
	}
}

func (s *summary) String() string {
	hl := ""
	if s.hilink > 0 {
		hl = fmt.Sprintf(", %d HiLink messages (no ICRC)", s.hilink)
	}
	return fmt.Sprintf("decoded %d frames: %d RoCE/IB transport frames, %d with a bad ICRC or VCRC%s, %d malformed",
		s.frames, s.transport, s.badCRC, hl, s.malformed)
}

// Link is what a frame arrived on: one of proto's link layers, or a
// HiLink port.
type Link uint8

// The links of frames. LinkEthernet and LinkIB are proto's.
const (
	LinkEthernet Link = iota
	LinkIB
	LinkHiLink
	linkInvalid
)

// protoLink is the proto link layer of l (Ethernet for HiLink, which
// proto does not parse).
func (l Link) protoLink() proto.LinkType {
	if l == LinkIB {
		return proto.LinkIB
	}
	return proto.LinkEthernet
}

// source yields frames with the link each arrived on.
type source interface {
	next() ([]byte, Link, error)
}

// linkOf is the Link a --link value names, or linkInvalid.
func linkOf(s string) Link {
	switch s {
	case "ethernet":
		return LinkEthernet
	case "ib":
		return LinkIB
	case "hilink":
		return LinkHiLink
	}
	return linkInvalid
}

func openSource(opts *Options) (source, error) {
	link := linkOf(opts.Link)
	if len(opts.Hex) > 0 {
		return newHexSource(strings.NewReader(strings.Join(opts.Hex, "\n")), link), nil
	}
	var in io.Reader = opts.IO.In
	name := "standard input"
	if opts.Input != "" && opts.Input != "-" {
		f, err := os.Open(opts.Input)
		if err != nil {
			return nil, err
		}
		// The file stays open until the process exits: decode is a
		// one-shot command.
		in, name = f, opts.Input
	}
	br := bufio.NewReaderSize(in, 1<<16)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case len(magic) == 4 && binary.LittleEndian.Uint32(magic) == 0x0A0D0D0A:
		r, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("%s: pcapng: %w", name, err)
		}
		return &ngSource{r: r, opts: opts}, nil
	case len(magic) == 4 && isPcapMagic(magic):
		r, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: pcap: %w", name, err)
		}
		lt, err := linkFromCapture(uint32(r.LinkType()), opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &pcapSource{r: r, link: lt, erf: uint32(r.LinkType()) == linkTypeERF}, nil
	}
	return newHexSource(br, link), nil
}

func isPcapMagic(m []byte) bool {
	switch binary.LittleEndian.Uint32(m) {
	case 0xA1B2C3D4, 0xD4C3B2A1, 0xA1B23C4D, 0x4D3CB2A1:
		return true
	}
	return false
}

// Link types of captures (tcpdump.org/linktypes.html).
const (
	linkTypeEthernet   = 1
	linkTypeUser0      = 147
	linkTypeHiLink     = 148 // LINKTYPE_USER1, hilink.LinkTypeHiLink
	linkTypeUser15     = 162
	linkTypeERF        = 197
	linkTypeInfiniBand = 247
	erfTypeInfiniBand  = 21
	erfHeaderSize      = 16
)

// linkFromCapture is the Link of a capture's link type lt: --link, when
// given, decides for the user link types.
func linkFromCapture(lt uint32, opts *Options) (Link, error) {
	user := lt >= linkTypeUser0 && lt <= linkTypeUser15
	switch {
	case user && opts.LinkSet:
		return linkOf(opts.Link), nil
	case lt == linkTypeEthernet:
		return LinkEthernet, nil
	case lt == linkTypeHiLink:
		return LinkHiLink, nil
	case lt == linkTypeInfiniBand, lt == linkTypeERF, user:
		return LinkIB, nil
	}
	return 0, fmt.Errorf("link type %d is neither Ethernet, InfiniBand nor HiLink", lt)
}

type pcapSource struct {
	r    *pcapgo.Reader
	link Link
	erf  bool
}

func (s *pcapSource) next() ([]byte, Link, error) {
	data, _, err := s.r.ReadPacketData()
	if err != nil {
		return nil, 0, err
	}
	if s.erf {
		return erfPayload(data), LinkIB, nil
	}
	return data, s.link, nil
}

// erfPayload strips the ERF record header (and extension headers) from an
// InfiniBand ERF record. A record of another type is returned whole; it
// then fails to parse and gets an error row.
func erfPayload(rec []byte) []byte {
	if len(rec) < erfHeaderSize || rec[8]&0x7F != erfTypeInfiniBand {
		return rec
	}
	off, more := erfHeaderSize, rec[8]&0x80 != 0
	for more && off+8 <= len(rec) {
		more = rec[off]&0x80 != 0
		off += 8
	}
	return rec[off:]
}

type ngSource struct {
	r    *pcapgo.NgReader
	opts *Options
}

func (s *ngSource) next() ([]byte, Link, error) {
	data, ci, err := s.r.ReadPacketData()
	if err != nil {
		return nil, 0, err
	}
	intf, err := s.r.Interface(ci.InterfaceIndex)
	if err != nil {
		return nil, 0, err
	}
	link, err := linkFromCapture(uint32(intf.LinkType), s.opts)
	if err != nil {
		return nil, 0, err
	}
	if uint32(intf.LinkType) == linkTypeERF {
		data = erfPayload(data)
	}
	return data, link, nil
}

// hexSource reads one hex frame per line.
type hexSource struct {
	sc   *bufio.Scanner
	link Link
	line int
}

func newHexSource(r io.Reader, link Link) *hexSource {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &hexSource{sc: sc, link: link}
}

func (s *hexSource) next() ([]byte, Link, error) {
	for s.sc.Scan() {
		s.line++
		text := s.sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimPrefix(strings.TrimSpace(text), "0x")
		clean := strings.Map(func(r rune) rune {
			switch r {
			case ' ', '\t', ':', '-':
				return -1
			}
			return r
		}, text)
		if clean == "" {
			continue
		}
		b, err := hex.DecodeString(clean)
		if err != nil {
			return nil, 0, fmt.Errorf("line %d is not hex: %w", s.line, err)
		}
		return b, s.link, nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, 0, err
	}
	return nil, 0, io.EOF
}
