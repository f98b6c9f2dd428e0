package proto

import (
	"encoding/binary"
	"hash/crc32"
)

// The invariant CRC (IBA Vol 1 section 7.8.1; RoCEv2: IBTA Annex A17.3.3)
// is the IEEE 802.3 CRC-32 (reflected, init all ones, final inversion:
// exactly hash/crc32's ChecksumIEEE) over the packet from the routing header
// through the pad, with the fields that may change in flight replaced by
// ones:
//
//   - the LRH (8 bytes): all ones. RoCE has no LRH and substitutes eight
//     0xFF bytes; HiNIC masks the whole LRH of native IB packets the same way
//     (docs/decisions/0001-ib-icrc.md says why);
//   - IPv4: TOS (DSCP and ECN), TTL and header checksum;
//   - IPv6 and GRH: traffic class, flow label and hop limit;
//   - UDP: checksum;
//   - BTH: byte 4 (FECN, BECN and the reserved bits, "resv8a").
//
// The 32-bit result is stored least-significant byte first, as Linux rxe and
// scapy do. Switches may therefore mark ECN, decrement TTL or remap VL
// without touching the ICRC; any change to an invariant byte breaks it.

// icrcSeed is the CRC state after the eight 0xFF bytes of the masked LRH;
// rxe's 0xDEBB20E3 is the same state before the final inversion.
var icrcSeed = crc32.ChecksumIEEE([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// maxMaskedHeaders is the largest masked prefix: IPv4 with the maximum
// options (60) + UDP (8) + BTH (12); an IPv6 or GRH prefix is smaller.
const maxMaskedHeaders = 60 + UDPHeaderSize + BTHSize

// ICRCRoCEv2 computes the ICRC of a RoCEv2 packet. pkt starts at the IP
// header (IPv4 or IPv6, told by the version nibble) and ends just before the
// ICRC; it must hold the IP, UDP and BTH headers (Parse ensures it for
// FrameRoCEv2 frames).
// It does not allocate.
func ICRCRoCEv2(pkt []byte) uint32 {
	v4 := pkt[0]>>4 == 4
	ipLen := IPv6HeaderSize
	if v4 {
		ipLen = int(pkt[0]&0x0F) * 4
	}
	n := ipLen + UDPHeaderSize + BTHSize
	var hdr [maxMaskedHeaders]byte
	copy(hdr[:], pkt[:n])
	if v4 {
		hdr[ipv4TOS] = 0xFF
		hdr[ipv4TTL] = 0xFF
		hdr[ipv4Checksum], hdr[ipv4Checksum+1] = 0xFF, 0xFF
	} else {
		maskIPv6Variant(hdr[:])
	}
	u := ipLen
	hdr[u+udpChecksum], hdr[u+udpChecksum+1] = 0xFF, 0xFF
	hdr[u+UDPHeaderSize+bthResv8a] = 0xFF
	c := crcUpdateSmall(icrcSeed, hdr[:n])
	return crc32.Update(c, crc32.IEEETable, pkt[n:])
}

// crcUpdateSmall is crc32.Update for the short masked header copies,
// computed slicing-by-8 over tables derived from the IEEE polynomial.
// crc32.Update's assembly makes its argument escape, which would move the
// stack copy to the heap on every packet; the long payload still goes
// through crc32.Update.
func crcUpdateSmall(crc uint32, p []byte) uint32 {
	t := &ieeeSlicing8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[7][byte(crc)] ^ t[6][byte(crc>>8)] ^ t[5][byte(crc>>16)] ^ t[4][byte(crc>>24)] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// ieeeSlicing8 holds the slicing-by-8 tables of the reflected IEEE CRC-32:
// table 0 is the classic byte table, table k advances a byte's contribution
// by k more bytes.
var ieeeSlicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		for k := 1; k < 8; k++ {
			c := t[k-1][i]
			t[k][i] = t[0][byte(c)] ^ c>>8
		}
	}
	return t
}()

// ICRCIB computes the ICRC of a native InfiniBand packet. pkt starts at the
// LRH and ends just before the ICRC; it must hold the LRH, the GRH when the
// LRH's LNH says there is one, and the BTH (Parse with LinkIB ensures it).
// It does not allocate.
func ICRCIB(pkt []byte) uint32 {
	return icrcAfterLRH(pkt[LRHSize:], LRH(pkt).LNH() == LNHIBAGlobal)
}

// icrcAfterLRH computes the ICRC of the packet that follows an LRH: an
// optional GRH, then BTH onwards. The masked LRH is the same eight 0xFF
// bytes the seed already holds, so a RoCEv1 packet (GRH right after
// Ethernet) uses it directly.
func icrcAfterLRH(pkt []byte, grh bool) uint32 {
	n := BTHSize
	if grh {
		n += GRHSize
	}
	var hdr [GRHSize + BTHSize]byte
	copy(hdr[:], pkt[:n])
	if grh {
		maskIPv6Variant(hdr[:])
	}
	hdr[n-BTHSize+bthResv8a] = 0xFF
	c := crcUpdateSmall(icrcSeed, hdr[:n])
	return crc32.Update(c, crc32.IEEETable, pkt[n:])
}

// maskIPv6Variant sets the traffic class, flow label and hop limit of an
// IPv6 header or GRH at the start of h to all ones.
func maskIPv6Variant(h []byte) {
	h[0] |= 0x0F
	h[1], h[2], h[3] = 0xFF, 0xFF, 0xFF
	h[ipv6HopLimit] = 0xFF
}

// PutICRC stores an ICRC value in its wire byte order.
func PutICRC(b []byte, icrc uint32) { binary.LittleEndian.PutUint32(b, icrc) }

// GetICRC reads an ICRC value stored in its wire byte order.
func GetICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// VCRC (IBA Vol 1 section 7.8.2): CRC-16 with polynomial
// x^16+x^12+x^3+x+1 (0x100B), reflected, initial value 0xFFFF, final
// inversion, over every byte from the start of the LRH through the ICRC. It
// is recomputed at every hop. Like the ICRC it is stored least-significant
// byte first (docs/decisions/0001-ib-icrc.md).
var vcrcTables = func() (t [8][256]uint16) {
	const polyReflected = 0xD008 // 0x100B bit-reversed
	for i := range t[0] {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ polyReflected
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		for k := 1; k < 8; k++ {
			c := t[k-1][i]
			t[k][i] = t[0][byte(c)] ^ c>>8
		}
	}
	return t
}()

// VCRC computes the variant CRC over b (LRH through ICRC), eight bytes at a
// time (slicing-by-8).
func VCRC(b []byte) uint16 {
	t := &vcrcTables
	c := uint16(0xFFFF)
	for len(b) >= 8 {
		c ^= binary.LittleEndian.Uint16(b)
		c = t[7][byte(c)] ^ t[6][byte(c>>8)] ^ t[5][b[2]] ^ t[4][b[3]] ^
			t[3][b[4]] ^ t[2][b[5]] ^ t[1][b[6]] ^ t[0][b[7]]
		b = b[8:]
	}
	for _, x := range b {
		c = c>>8 ^ t[0][byte(c)^x]
	}
	return ^c
}

// PutVCRC stores a VCRC value in its wire byte order.
func PutVCRC(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

// GetVCRC reads a VCRC value stored in its wire byte order.
func GetVCRC(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
