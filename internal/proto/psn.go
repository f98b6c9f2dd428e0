package proto

// PSN is a 24-bit packet sequence number (IBA Vol 1 section 9.7.1). PSNs
// wrap at 2^24; two PSNs are compared within a window of half the space
// (2^23), which is how responders classify a request as new, duplicate or
// out of sequence (IBA 9.7.5.1.1).
type PSN uint32

const (
	// PSNMask masks a PSN to 24 bits.
	PSNMask = 0xFFFFFF
	// PSNModulus is the number of distinct PSNs.
	PSNModulus = 1 << 24
	// PSNHalfWindow is the largest forward distance that still counts as
	// "after"; distances of PSNHalfWindow and more count as "before".
	PSNHalfWindow = 1 << 23
)

// Add returns p advanced by n (which may be negative), wrapped to 24 bits.
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & PSNMask) }

// Next returns p + 1.
func (p PSN) Next() PSN { return (p + 1) & PSNMask }

// Diff returns the signed distance p - q in [-2^23, 2^23).
func (p PSN) Diff(q PSN) int32 {
	d := int32(uint32(p)-uint32(q)) << 8 // sign-extend the 24-bit difference
	return d >> 8
}

// Compare returns -1 when p comes before q, 0 when equal, +1 when after.
func (p PSN) Compare(q PSN) int {
	switch d := p.Diff(q); {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// InWindow reports whether p lies in the n PSNs starting at start
// (start <= p < start+n, with wrap). An empty or negative window holds
// nothing; n is capped at PSNModulus.
func (p PSN) InWindow(start PSN, n int) bool {
	if n <= 0 {
		return false
	}
	d := uint32(p-start) & PSNMask
	return uint64(d) < uint64(min(n, PSNModulus))
}
