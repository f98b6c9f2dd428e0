package hilink

import "testing"

// TestFIFOReusesSpace: a queue that never empties keeps its order and
// does not grow with the frames that went through it.
func TestFIFOReusesSpace(t *testing.T) {
	var q fifo
	frames := make([]frame, 8)
	in, out := 0, 0
	for range 100000 {
		for range 3 {
			q.push(&frames[in%len(frames)])
			in++
		}
		for range 3 {
			if q.len() > 1 {
				if got := q.pop(); got != &frames[out%len(frames)] {
					t.Fatalf("frame %d out of order", out)
				}
				out++
			}
		}
	}
	if q.len() != in-out || cap(q.q) > 64 {
		t.Errorf("%d queued, slice of %d", q.len(), cap(q.q))
	}
}
