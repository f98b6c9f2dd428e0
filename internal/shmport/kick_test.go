package shmport

import (
	"encoding/binary"
	"testing"
)

// TestKickStaysOne: a wake-up adds 1 to the peer's eventfd, whatever the
// sleeper read from its own. The sender below sleeps for space and reads
// a count of 5 (as a consumer that kicked five times would leave it); the
// kick it then gives its peer's consumer must still add 1. Before, sleep
// read into the buffer kicks are written from, so each kick added the
// count last read and kicks grew with every wake-up until the 64-bit
// counter was full and a kick could only block (TestPairOrder hung so).
func TestKickStaysOne(t *testing.T) {
	a, b := testPair(t)
	var five [8]byte
	binary.LittleEndian.PutUint64(five[:], 5)
	if _, err := b.rxSpace.Write(five[:]); err != nil { // a's txSpace
		t.Fatal(err)
	}
	if err := a.sleep(a.txSpace, nil, a.sleepBuf(true)); err != nil {
		t.Fatal(err)
	}
	a.tx.r.consWait.Store(1) // b's consumer sleeps: a's next send kicks it
	if err := a.Send(frameOf(1, 64)); err != nil {
		t.Fatal(err)
	}
	var got [8]byte
	if _, err := b.rxData.Read(got[:]); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint64(got[:]); v != 1 {
		t.Fatalf("the kick added %d to the consumer's eventfd, want 1", v)
	}
}
