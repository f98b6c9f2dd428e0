package decode

import "github.com/PacketFive/hinic/internal/proto"

// describeMAD summarises the MAD in a QP0/QP1 payload: its common header,
// and for a directed-route SMP the hop pointer, hop count and direction. It
// returns nil when the payload is not a 256-byte MAD.
func describeMAD(payload []byte) *MAD {
	m, err := proto.ParseMAD(payload)
	if err != nil {
		return nil
	}
	d := &MAD{
		Class: int(m.MgmtClass()), Method: int(m.Method()), AttrID: int(m.AttributeID()),
		AttrMod: m.AttributeModifier(), TID: m.TransactionID(), Status: int(m.Status()),
	}
	if smp, err := proto.ParseSMP(payload); err == nil && smp.IsDirectedRoute() {
		dir := 0
		if smp.Direction() {
			dir = 1
		}
		d.Status = int(smp.Status())
		d.HopPtr, d.HopCount, d.Direction = ptr(int(smp.HopPointer())), ptr(int(smp.HopCount())), &dir
	}
	return d
}
