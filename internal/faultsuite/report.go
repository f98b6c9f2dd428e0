package faultsuite

import (
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
)

// Report is what a run did and what the faults cost.
type Report struct {
	Hosts   int           `json:"hosts"`
	Streams int           `json:"streams"` // RC QPs × 2 directions
	MTU     int           `json:"mtu"`
	Seed    uint64        `json:"seed"`
	Faults  FaultRates    `json:"faults_config"`
	Ops     int           `json:"ops"`     // planned
	Checked int           `json:"checked"` // completed and checked
	Bytes   int64         `json:"bytes"`   // payload bytes of the checked ops
	Elapsed time.Duration `json:"-"`
	Seconds float64       `json:"elapsed_s"`
	Kinds   []KindReport  `json:"kinds"`
	// Engines holds each host's engine counters; Total their sum.
	Engines []EngineReport `json:"engines"`
	Total   EngineReport   `json:"total"`
	// Injected is what the fabric injected on the hosts' ports.
	Injected fabric.FaultCounts `json:"faults_injected"`
	// SwitchMalformed counts frames the switch dropped because they no
	// longer parsed (a corrupted header).
	SwitchMalformed uint64 `json:"switch_malformed"`
	FabricFrames    uint64 `json:"fabric_frames"` // frames the hosts sent into the fabric, over every fabric of the run
	// FabricRestarts is how many times the fabric was restarted
	// (Config.Restarts).
	FabricRestarts int `json:"fabric_restarts,omitempty"`

	Atomics AtomicsReport `json:"atomics"`
	// UD sums the datagram flows: sent, delivered, lost (counted, never
	// silent), duplicated.
	UD UDReport `json:"ud"`
}

// FaultRates are the fault probabilities of a run, and the seed of the
// fabric's fault injection.
type FaultRates struct {
	Drop      float64 `json:"drop"`
	Duplicate float64 `json:"duplicate"`
	Reorder   float64 `json:"reorder"`
	Corrupt   float64 `json:"corrupt"`
	Seed      uint64  `json:"seed"`
}

// KindReport counts the checked ops of one kind.
type KindReport struct {
	Kind  string `json:"kind"`
	Ops   int    `json:"ops"`
	Bytes int64  `json:"bytes"`
}

// EngineReport is the part of an engine's counters (rdma.Counters) the
// faults move.
type EngineReport struct {
	Host               string `json:"host,omitempty"`
	TxPackets          uint64 `json:"tx_packets"`
	RxPackets          uint64 `json:"rx_packets"`
	Retransmits        uint64 `json:"retransmits"`
	RetransmitTimeouts uint64 `json:"retransmit_timeouts"`
	SeqNAKsReceived    uint64 `json:"seq_naks_received"`
	SeqNAKsSent        uint64 `json:"seq_naks_sent"`
	RNRNAKsReceived    uint64 `json:"rnr_naks_received"`
	RNRNAKsSent        uint64 `json:"rnr_naks_sent"`
	ErrNAKsReceived    uint64 `json:"err_naks_received"`
	ErrNAKsSent        uint64 `json:"err_naks_sent"`
	RetryExceeded      uint64 `json:"retry_exceeded"`
	RNRRetryExceeded   uint64 `json:"rnr_retry_exceeded"`
	CompletionErrors   uint64 `json:"completion_errors"`
	ReadGapRetries     uint64 `json:"read_gap_retries"`
	StaleResponses     uint64 `json:"stale_responses"`
	OutOfSequence      uint64 `json:"out_of_sequence"`
	Duplicates         uint64 `json:"duplicates"`
	ReadReplays        uint64 `json:"read_replays"`
	AtomicsExecuted    uint64 `json:"atomics_executed"`
	AtomicReplays      uint64 `json:"atomic_replays"`
	// Frames the engine dropped on receipt: bad ICRC, malformed (does not
	// parse, bad IPv4 checksum), not for this host, unknown QP, receive
	// queue full.
	RxICRCErrors uint64 `json:"rx_icrc_errors"`
	RxMalformed  uint64 `json:"rx_malformed"`
	RxNotForUs   uint64 `json:"rx_not_for_us"`
	RxUnknownQP  uint64 `json:"rx_unknown_qp"`
	RxDropped    uint64 `json:"rx_dropped"`
}

func (t *EngineReport) add(e EngineReport) {
	t.TxPackets += e.TxPackets
	t.RxPackets += e.RxPackets
	t.Retransmits += e.Retransmits
	t.RetransmitTimeouts += e.RetransmitTimeouts
	t.SeqNAKsReceived += e.SeqNAKsReceived
	t.SeqNAKsSent += e.SeqNAKsSent
	t.RNRNAKsReceived += e.RNRNAKsReceived
	t.RNRNAKsSent += e.RNRNAKsSent
	t.ErrNAKsReceived += e.ErrNAKsReceived
	t.ErrNAKsSent += e.ErrNAKsSent
	t.RetryExceeded += e.RetryExceeded
	t.RNRRetryExceeded += e.RNRRetryExceeded
	t.CompletionErrors += e.CompletionErrors
	t.ReadGapRetries += e.ReadGapRetries
	t.StaleResponses += e.StaleResponses
	t.OutOfSequence += e.OutOfSequence
	t.Duplicates += e.Duplicates
	t.ReadReplays += e.ReadReplays
	t.AtomicsExecuted += e.AtomicsExecuted
	t.AtomicReplays += e.AtomicReplays
	t.RxICRCErrors += e.RxICRCErrors
	t.RxMalformed += e.RxMalformed
	t.RxNotForUs += e.RxNotForUs
	t.RxUnknownQP += e.RxUnknownQP
	t.RxDropped += e.RxDropped
}

// AtomicsReport sums the atomic ledgers of every host.
type AtomicsReport struct {
	Adds      int    `json:"fetch_and_adds"`
	Sum       uint64 `json:"sum_added"`
	Swaps     int    `json:"cmp_and_swaps"`
	Swapped   int    `json:"cmp_and_swaps_succeeded"`
	Counters  int    `json:"counters"` // FETCH_AND_ADD counters, every one at its exact sum
	SwapWords int    `json:"swap_words"`
}

func (s *suite) newReport() *Report {
	c := s.cfg
	return &Report{Hosts: c.Hosts, Streams: len(s.streams), MTU: c.MTU, Seed: c.Seed, Ops: c.Ops,
		Faults: FaultRates{Drop: c.Faults.Drop, Duplicate: c.Faults.Duplicate, Reorder: c.Faults.Reorder,
			Corrupt: c.Faults.Corrupt, Seed: c.Faults.Seed}}
}

// fill completes the report from the streams' progress, the engines'
// counters and the fabric's.
func (s *suite) fill(r *Report) {
	r.Checked = int(s.done.Load())
	r.Seconds = r.Elapsed.Seconds()
	var kr [NumKinds]KindReport
	for k := range kr {
		kr[k].Kind = Kind(k).String()
	}
	for _, st := range s.streams {
		for _, o := range st.ops {
			if o.seq >= st.checked {
				break
			}
			kr[o.kind].Ops++
			if kinds[o.kind].sized {
				kr[o.kind].Bytes += int64(o.size)
			}
		}
	}
	for _, u := range s.ud {
		for _, o := range u.ops[:u.sent] {
			kr[o.kind].Ops++
			kr[o.kind].Bytes += int64(o.size)
		}
	}
	for k := range kr {
		if s.cfg.Mix[k] > 0 {
			k := kr[k]
			r.Kinds = append(r.Kinds, k)
			r.Bytes += k.Bytes
		}
	}
	r.Total = EngineReport{}
	r.Engines = r.Engines[:0]
	for _, h := range s.hosts {
		c := h.Device.Counters()
		e := EngineReport{Host: h.Name, TxPackets: c.TxPackets, RxPackets: c.RxPackets,
			Retransmits: c.Retransmits, RetransmitTimeouts: c.RetransmitTimeouts,
			SeqNAKsReceived: c.SeqNAKsReceived, SeqNAKsSent: c.SeqNAKsSent,
			RNRNAKsReceived: c.RNRNAKsReceived, RNRNAKsSent: c.RNRNAKsSent, ErrNAKsReceived: c.ErrNAKsReceived,
			ErrNAKsSent: c.ErrNAKsSent, RetryExceeded: c.RetryExceeded, RNRRetryExceeded: c.RNRRetryExceeded,
			CompletionErrors: c.CompletionErrors,
			ReadGapRetries:   c.ReadGapRetries, StaleResponses: c.StaleResponses, OutOfSequence: c.OutOfSequence,
			Duplicates: c.Duplicates, ReadReplays: c.ReadReplays,
			AtomicsExecuted: c.AtomicsExecuted, AtomicReplays: c.AtomicReplays,
			RxICRCErrors: c.RxICRCErrors, RxMalformed: c.RxMalformed, RxNotForUs: c.RxNotForUs,
			RxUnknownQP: c.RxUnknownQP, RxDropped: c.RxDropped}
		r.Engines = append(r.Engines, e)
		r.Total.add(e)
	}
	r.Injected, r.SwitchMalformed, r.FabricFrames = fabric.FaultCounts{}, 0, 0
	for _, st := range s.fabricStatuses() {
		for _, sw := range st.Switches {
			for _, p := range sw.Ports {
				if p.Num > len(s.hosts) {
					continue
				}
				r.Injected = r.Injected.Add(p.FaultKinds)
				r.SwitchMalformed += p.Drops[fabric.DropMalformed.String()]
				r.FabricFrames += p.RxFrames
			}
		}
	}
	if s.restarter != nil {
		r.FabricRestarts = s.restarter.done
	}
	a := AtomicsReport{Counters: addWords * len(s.atomics), SwapWords: swapWords * len(s.atomics)}
	for _, at := range s.atomics {
		adds, sum, swaps, swapped := at.totals()
		a.Adds += adds
		a.Sum += sum
		a.Swaps += swaps
		a.Swapped += swapped
	}
	r.Atomics = a
	r.UD, _ = s.udTotals()
}
