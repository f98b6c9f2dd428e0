package faultsuite

import (
	"context"
	"fmt"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
)

// restarter is the flow of Config.Restarts: it restarts the rack's
// fabric (rack.RestartFabric: the switch goes away with every frame in
// it, a new one starts on the same sockets, every host dials its port
// again) each time another 1/(Restarts+1) of the operations has been
// checked, while the streams keep posting. The RC checks stay what they
// are: every operation completes once, in order, with its data; what
// the switch lost in between is retransmitted within the retry budget.
type restarter struct {
	s    *suite
	done int // restarts made (its goroutine; read after run)
}

// restartPoll is how often the restarter looks at the checked count.
const restartPoll = time.Millisecond

func (r *restarter) run(ctx context.Context) error {
	s := r.s
	n := s.cfg.Restarts
	t := time.NewTicker(restartPoll)
	defer t.Stop()
	for r.done < n {
		at := int64(s.cfg.Ops) * int64(r.done+1) / int64(n+1)
		for s.done.Load() < at {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		st, err := s.rack.RestartFabric(ctx)
		if err != nil {
			return fmt.Errorf("faultsuite: fabric restart %d at %d ops checked: %w", r.done+1, s.done.Load(), err)
		}
		s.oldFabrics = append(s.oldFabrics, st)
		r.done++
		if s.cfg.Progress != nil {
			s.cfg.Progress("faults: fabric restarted (%d of %d) at %d/%d operations checked", r.done, n, s.done.Load(), s.cfg.Ops)
		}
	}
	return nil
}

func (r *restarter) finish() error {
	if r.done != r.s.cfg.Restarts {
		return fmt.Errorf("%d of %d fabric restarts made", r.done, r.s.cfg.Restarts)
	}
	return nil
}

// fabricStatuses are the statuses of every fabric of the run: the ones
// restarts replaced, then the current one.
func (s *suite) fabricStatuses() []fabric.Status {
	out := append([]fabric.Status(nil), s.oldFabrics...)
	for _, r := range s.racks {
		out = append(out, r.Fabric.Status())
	}
	return out
}
