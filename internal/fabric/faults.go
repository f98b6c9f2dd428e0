package fabric

import (
	"math/rand/v2"
	"time"
)

// faultState injects the faults configured on a port into the frames it
// receives. Owned by the port's rx goroutine (and its teardown, which
// runs on the same goroutine).
type faultState struct {
	cfg  FaultsConfig
	rng  *rand.Rand
	held *frame // a frame held back to be delivered after the next one
	hNow time.Time
}

func newFaultState(cfg FaultsConfig, portNum int) *faultState {
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	return &faultState{cfg: cfg, rng: rand.New(rand.NewPCG(seed, uint64(portNum)))}
}

// apply decides f's fate and passes what survives to the pipeline.
func (fs *faultState) apply(sw *Switch, p *port, f *frame, now time.Time) {
	c := &fs.cfg
	if c.Drop > 0 && fs.rng.Float64() < c.Drop {
		p.ctr.faults.Add(1)
		p.ctr.faultDrops.Add(1)
		sw.drop(p, f, DropFault)
		return
	}
	if c.Corrupt > 0 && fs.rng.Float64() < c.Corrupt && len(f.buf) > 14 {
		// Flip one bit past the Ethernet addresses, so the frame still
		// goes where it was going and the receiver's checks catch it.
		i := 14 + fs.rng.IntN(len(f.buf)-14)
		f.buf[i] ^= 1 << fs.rng.IntN(8)
		p.ctr.faults.Add(1)
		p.ctr.faultCorrupts.Add(1)
	}
	var dup *frame
	if c.Duplicate > 0 && fs.rng.Float64() < c.Duplicate {
		dup = sw.pool.clone(f)
		p.ctr.faults.Add(1)
		p.ctr.faultDups.Add(1)
	}
	if c.Reorder > 0 && fs.held == nil && fs.rng.Float64() < c.Reorder {
		fs.held, fs.hNow = f, now
		p.ctr.faults.Add(1)
		p.ctr.faultReorders.Add(1)
		if dup != nil {
			sw.process(p, dup, now)
		}
		return
	}
	sw.process(p, f, now)
	if dup != nil {
		sw.process(p, dup, now)
	}
	if fs.held != nil {
		h := fs.held
		fs.held = nil
		sw.process(p, h, now)
	}
}

// flush drops a held frame: the session ended before a next one came.
func (fs *faultState) flush(sw *Switch) {
	if fs.held != nil {
		sw.pool.put(fs.held)
		fs.held = nil
	}
}
