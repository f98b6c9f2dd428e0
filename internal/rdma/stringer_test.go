package rdma

import (
	"testing"

	"github.com/PacketFive/hinic/internal/testutil"
)

// TestStringerGenerated fails when zstring.go is not what go generate
// (stringer) makes of the enums now.
func TestStringerGenerated(t *testing.T) {
	testutil.CheckStringer(t, "types.go")
}

// TestEnumStrings pins the texts of the generated String methods: they
// are libibverbs' names, which tools print and scripts match.
func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		got  interface{ String() string }
		want string
	}{
		{QPTypeSMI, "SMI"}, {QPTypeRC, "RC"}, {QPTypeRawPacket, "RAW_PACKET"}, {QPTypeXRCTgt, "XRC_TGT"},
		{QPType(5), "QPType(5)"},
		{WRRDMAWriteWithImm, "RDMA_WRITE_WITH_IMM"}, {WRSendWithInv, "SEND_WITH_INV"},
		{WRAtomicWrite, "ATOMIC_WRITE"}, {WROpcode(10), "WROpcode(10)"},
		{WCSend, "SEND"}, {WCAtomicWrite, "ATOMIC_WRITE"}, {WCRecvRDMAWithImm, "RECV_RDMA_WITH_IMM"},
		{WCTMNoTag, "TM_NO_TAG"}, {WCOpcode(8), "WCOpcode(8)"},
		{EventCQErr, "CQ_ERR"}, {EventQPLastWQEReached, "QP_LAST_WQE_REACHED"},
		{EventClientReregister, "CLIENT_REREGISTER"}, {AsyncEventType(2), "AsyncEventType(2)"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%T %d: String() = %q, want %q", c.got, c.got, s, c.want)
		}
	}
}
