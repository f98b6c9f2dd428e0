package rdma

import (
	"sync"
	"testing"
)

func TestPtrTable(t *testing.T) {
	var tab ptrTable[int]
	if tab.load(0) != nil || tab.load(1000) != nil {
		t.Fatal("empty table has a value")
	}
	tab.store(700, nil) // clearing past the end grows nothing
	if tab.dir.Load() != nil {
		t.Fatal("a nil store grew the table")
	}
	vals := map[uint32]*int{}
	for _, i := range []uint32{0, 1, 255, 256, 700, 4095} {
		v := new(int)
		*v = int(i)
		tab.store(i, v)
		vals[i] = v
	}
	for i, v := range vals {
		if tab.load(i) != v {
			t.Errorf("slot %d: %v, want %v", i, tab.load(i), v)
		}
	}
	for _, i := range []uint32{2, 257, 699, 4094, 4096, 1 << 20} {
		if tab.load(i) != nil {
			t.Errorf("slot %d: %v, want nil", i, tab.load(i))
		}
	}
	tab.store(256, nil)
	if tab.load(256) != nil || tab.load(255) != vals[255] {
		t.Error("clearing a slot touched another")
	}
}

// TestPtrTableConcurrent: readers race a writer that grows the table and
// replaces slots; every value a reader sees is one stored at that slot
// (run with -race).
func TestPtrTableConcurrent(t *testing.T) {
	var tab ptrTable[uint32]
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := uint32(0); i < 2048; i += 37 {
					if v := tab.load(i); v != nil && *v != i {
						t.Errorf("slot %d holds %d", i, *v)
						return
					}
				}
			}
		}()
	}
	for round := range 20 {
		for i := uint32(0); i < 2048; i++ {
			if (i+uint32(round))%3 == 0 {
				tab.store(i, nil)
			} else {
				v := i
				tab.store(i, &v)
			}
		}
	}
	close(stop)
	wg.Wait()
}
