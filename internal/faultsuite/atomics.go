package faultsuite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/PacketFive/hinic/internal/rack"
)

// hostAtomics are the atomic words of one host, which every stream
// towards that host hits, and the ledger of what each atomic returned.
// Safe for concurrent use.
type hostAtomics struct {
	host *rack.Host
	addr uint64 // addWords FETCH_AND_ADD counters, then swapWords CMP_AND_SWP words

	mu      sync.Mutex
	entries []entry
}

// entry is one completed atomic: the value it returned and its operands.
type entry struct {
	stream        string
	seq           int
	word          int
	old           uint64 // the original value the responder returned
	add           uint64 // FETCH_AND_ADD
	compare, swap uint64 // CMP_AND_SWP
}

func (e entry) String() string { return fmt.Sprintf("stream %s op %d", e.stream, e.seq) }

func (a *hostAtomics) record(e entry) {
	a.mu.Lock()
	a.entries = append(a.entries, e)
	a.mu.Unlock()
}

// check proves every word's history against its final value in memory.
//
// A FETCH_AND_ADD counter starts at 0 and only grows (every add is at
// least 1), so sorted by the value they fetched, its adds must form one
// chain: the first fetched 0, each next fetched the one before plus its
// add, and the counter now holds the last plus its add, the exact sum. An
// add executed twice, lost, or answered with another's value breaks it.
//
// A CMP_AND_SWP word starts at 0 and every swap value is unique, so the
// successful swaps (returned value == compare) must form one chain from 0
// to the word's value now, each value swapped away once; a failed one
// must have returned a value of that chain other than its compare.
func (a *hostAtomics) check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	mem := a.host.Memory
	word := func(w int) (uint64, error) {
		var b [8]byte
		err := mem.ReadAt(b[:], a.addr+8*uint64(w))
		return binary.LittleEndian.Uint64(b[:]), err
	}
	byWord := map[int][]entry{}
	for _, e := range a.entries {
		byWord[e.word] = append(byWord[e.word], e)
	}
	for w := range addWords {
		es := byWord[w]
		slices.SortFunc(es, func(x, y entry) int {
			switch {
			case x.old < y.old:
				return -1
			case x.old > y.old:
				return 1
			}
			return 0
		})
		var sum, total uint64
		for _, e := range es {
			total += e.add
		}
		for i, e := range es {
			if e.old != sum {
				what := "a value no add left"
				if i > 0 && e.old == es[i-1].old {
					what = "the same value as " + es[i-1].String()
				}
				errs = append(errs, fmt.Errorf("FETCH_AND_ADD counter %d of %s: %v fetched %d, %s; the %d adds before it sum to %d",
					w, a.host.Name, e, e.old, what, i, sum))
				break
			}
			sum += e.add
		}
		got, err := word(w)
		if err != nil {
			return err
		}
		if got != total {
			errs = append(errs, fmt.Errorf("FETCH_AND_ADD counter %d of %s holds %d, want %d, the sum of its %d adds",
				w, a.host.Name, got, total, len(es)))
		}
	}
	for w := addWords; w < addWords+swapWords; w++ {
		succ := map[uint64]entry{}
		held := map[uint64]bool{0: true}
		var fails []entry
		for _, e := range byWord[w] {
			if e.old != e.compare {
				fails = append(fails, e)
				continue
			}
			if prev, ok := succ[e.compare]; ok {
				errs = append(errs, fmt.Errorf("CMP_AND_SWP word %d of %s: %v and %v both swapped away %#x",
					w, a.host.Name, prev, e, e.compare))
			}
			succ[e.compare] = e
			held[e.swap] = true
		}
		v, steps := uint64(0), 0
		for e, ok := succ[v]; ok && steps <= len(succ); e, ok = succ[v] {
			v, steps = e.swap, steps+1
		}
		got, err := word(w)
		if err != nil {
			return err
		}
		if steps != len(succ) || got != v {
			errs = append(errs, fmt.Errorf("CMP_AND_SWP word %d of %s holds %#x; its %d successful swaps chain from 0 to %#x in %d steps",
				w, a.host.Name, got, len(succ), v, steps))
		}
		for _, e := range fails {
			if !held[e.old] {
				errs = append(errs, fmt.Errorf("CMP_AND_SWP word %d of %s: %v returned %#x, a value the word never held",
					w, a.host.Name, e, e.old))
			}
		}
	}
	return errors.Join(errs...)
}

// totals sums the ledger: FETCH_AND_ADD counters and their adds, and
// CMP_AND_SWP attempts and successes.
func (a *hostAtomics) totals() (adds int, sum uint64, swaps, swapped int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.entries {
		if e.word < addWords {
			adds++
			sum += e.add
		} else {
			swaps++
			if e.old == e.compare {
				swapped++
			}
		}
	}
	return
}
