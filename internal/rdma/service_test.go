package rdma

import (
	"strings"
	"testing"
)

// TestServiceTables checks the per-QP-type table against itself: every
// type CreateQP accepts has a transition table, posts only named opcodes
// within wrOps, and is exactly one of reliable, datagram or UC; and the
// datagram and connected services take their own transport.
func TestServiceTables(t *testing.T) {
	for _, qt := range []QPType{QPTypeSMI, QPTypeGSI, QPTypeRC, QPTypeUC, QPTypeUD, QPTypeRawPacket, QPTypeXRCIni, QPTypeXRCTgt} {
		s := &services[qt]
		if s.transitions == nil {
			t.Errorf("%v: no transition table", qt)
		}
		for op := WROpcode(0); op < 32; op++ {
			if s.posts.has(op) && (int(op) >= len(wrOps) || strings.HasPrefix(op.String(), "WROpcode(")) {
				t.Errorf("%v posts %v, which is not a libibverbs opcode wrOps describes", qt, op)
			}
		}
		if s.reliable && s.datagram {
			t.Errorf("%v is both reliable and datagram", qt)
		}
		if unreliable := !s.reliable && !s.datagram; unreliable != (qt == QPTypeUC) {
			t.Errorf("%v: neither reliable nor datagram is UC alone", qt)
		}
	}
	for _, c := range []struct {
		qt    QPType
		op    WROpcode
		posts bool
	}{
		{QPTypeRC, WRAtomicWrite, true}, {QPTypeRC, WRBindMW, true}, {QPTypeXRCIni, WRRDMARead, true},
		{QPTypeUC, WRRDMAWriteWithImm, true}, {QPTypeUC, WRRDMARead, false}, {QPTypeUC, WRSendWithInv, false},
		{QPTypeUD, WRSendWithImm, true}, {QPTypeUD, WRRDMAWrite, false}, {QPTypeGSI, WRSend, true},
		{QPTypeRawPacket, WRSend, true}, {QPTypeRawPacket, WRSendWithImm, false}, {QPTypeXRCTgt, WRSend, false},
		{QPTypeRC, 12, false},
	} {
		if got := services[c.qt].posts.has(c.op); got != c.posts {
			t.Errorf("%v posts %v: %v, want %v", c.qt, c.op, got, c.posts)
		}
	}
}
