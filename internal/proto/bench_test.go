package proto

import (
	"hash/crc32"
	"testing"
)

// BenchmarkParse parses a RoCEv2 RDMA WRITE of each size; compare with
// BenchmarkCRC32Raw, the raw ceiling of touching the same bytes once.
func BenchmarkParse(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		f := samplePacket(OpRCWriteOnly, size)
		frame := make([]byte, f.Len())
		_, _ = f.Encode(frame)
		b.Run("size="+itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := Parse(frame, LinkEthernet); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkICRC checks the ICRC of a RoCEv2 frame of each size.
func BenchmarkICRC(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		f := samplePacket(OpRCWriteOnly, size)
		frame := make([]byte, f.Len())
		_, _ = f.Encode(frame)
		p, _ := Parse(frame, LinkEthernet)
		b.Run("size="+itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if !p.ICRCValid() {
					b.Fatal("bad ICRC")
				}
			}
		})
	}
}

// BenchmarkCRC32Raw is the ceiling for BenchmarkICRC: hash/crc32 over the
// same number of bytes with no masking.
func BenchmarkCRC32Raw(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		f := samplePacket(OpRCWriteOnly, size)
		frame := make([]byte, f.Len())
		_, _ = f.Encode(frame)
		span := frame[EthernetHeaderSize : len(frame)-ICRCSize]
		b.Run("size="+itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				_ = crc32.ChecksumIEEE(span)
			}
		})
	}
}

// BenchmarkEncode builds a RoCEv2 RDMA WRITE of each size, ICRC included.
func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		f := samplePacket(OpRCWriteOnly, size)
		frame := make([]byte, f.Len())
		b.Run("size="+itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := f.Encode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVCRC computes the VCRC over a 4 KiB IB packet.
func BenchmarkVCRC(b *testing.B) {
	f := samplePacket(OpRCWriteOnly, 4096)
	f.Link = LinkIB
	frame := make([]byte, f.Len())
	_, _ = f.Encode(frame)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		_ = VCRC(frame[:len(frame)-VCRCSize])
	}
}
