package rack

import (
	"context"
	"fmt"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// Poller hands out the completions of one CQ one at a time, waiting on the
// CQ's completion channel when it is empty (or polling with short sleeps
// when the CQ has none). A Poller belongs to one goroutine.
type Poller struct {
	cq      *rdma.CQ
	events  *rdma.CompChannel
	wc      []rdma.WC
	n, next int
	// Timeout bounds the wait for one completion; default 30 s.
	Timeout time.Duration
	// deadline and tick are made on the first wait and reused.
	deadline, tick *time.Timer
}

// NewPoller returns a Poller for cq, waiting on events if it is not nil.
func NewPoller(cq *rdma.CQ, events *rdma.CompChannel) *Poller {
	return &Poller{cq: cq, events: events, wc: make([]rdma.WC, 32), Timeout: 30 * time.Second}
}

// Next returns the next completion. A completion whose status is not
// success is returned with an error naming it.
func (p *Poller) Next(ctx context.Context) (rdma.WC, error) {
	if p.next == p.n {
		if err := p.fill(ctx); err != nil {
			return rdma.WC{}, err
		}
	}
	wc := p.wc[p.next]
	p.next++
	if wc.Status != rdma.WCSuccess {
		return wc, fmt.Errorf("work request %d (%v) completed with %v", wc.WRID, wc.Opcode, wc.Status)
	}
	return wc, nil
}

func (p *Poller) fill(ctx context.Context) error {
	// A CQ that has completions costs no timer: the timers are made once,
	// and only armed when the Poller is about to wait.
	if p.n, p.next = p.cq.Poll(p.wc), 0; p.n > 0 {
		return nil
	}
	if p.deadline == nil {
		p.deadline, p.tick = time.NewTimer(p.Timeout), time.NewTimer(time.Hour)
		p.tick.Stop()
	} else {
		p.deadline.Reset(p.Timeout)
	}
	defer p.deadline.Stop()
	for {
		if p.events == nil {
			p.tick.Reset(20 * time.Microsecond)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-p.deadline.C:
				return fmt.Errorf("no completion within %v", p.Timeout)
			case <-p.tick.C:
			}
		} else {
			if err := p.cq.ReqNotify(false); err != nil {
				return err
			}
			// A completion may have landed between Poll and ReqNotify.
			if p.n, p.next = p.cq.Poll(p.wc), 0; p.n > 0 {
				return nil
			}
			select {
			case <-p.events.Events():
			case <-ctx.Done():
				return ctx.Err()
			case <-p.deadline.C:
				return fmt.Errorf("no completion within %v", p.Timeout)
			}
		}
		if p.n, p.next = p.cq.Poll(p.wc), 0; p.n > 0 {
			return nil
		}
	}
}
