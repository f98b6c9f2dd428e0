package fabric

import "encoding/binary"

// fakeIB is a minimal IB engine for tests that do not need ibsw: it
// forwards by a LID table (DLID -> port) and knows links.
type fakeIB struct {
	lft  map[uint16]int
	link map[int]bool
}

func fakeIBFactory(cfg IBConfig) (IBSwitch, error) {
	return &fakeIB{lft: map[uint16]int{}, link: map[int]bool{}}, nil
}

func (f *fakeIB) Ingress(in int, pkt []byte, emit func(int, []byte)) {
	if len(pkt) < 8 {
		return
	}
	if out, ok := f.lft[binary.BigEndian.Uint16(pkt[2:])]; ok && f.link[out] && out != in {
		emit(out, pkt)
	}
}

func (f *fakeIB) SetPortLink(p int, up bool) { f.link[p] = up }

func (f *fakeIB) Status() *IBStatus { return &IBStatus{} }
