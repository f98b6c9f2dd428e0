// Package proto holds HiNIC's wire formats: zero-copy views and encoders for
// the Ethernet, IPv4/IPv6 and UDP headers that carry RoCEv2, the InfiniBand
// LRH and GRH, the IBA transport headers (BTH and its extension headers),
// management datagrams (MAD, SMP, PMA), the 802.1Qbb PFC frame and the
// RoCEv2 CNP; the invariant and variant CRCs (ICRC, VCRC); 24-bit PSN
// arithmetic; and Parse, which classifies a frame and returns views of its
// headers without allocating.
//
// Each header is a byte-slice type (for example `type BTH []byte`) whose
// accessors are named after the fields of the specification that defines it,
// with an Encode method that writes every field of a Fields struct. Views do
// not validate: Parse (or a header's own ParseX function) checks lengths once
// at the entry point, after which accessors may be used freely. Views share
// the caller's buffer; whoever owns the buffer owns the view.
//
// The package imports only the standard library and nothing else of HiNIC:
// every other package may depend on it.
//
// Unless stated otherwise, values of these types are not safe for
// concurrent mutation; concurrent reads of an unchanging buffer are fine.
package proto
