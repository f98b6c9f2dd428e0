package rdma

import "strconv"

// AsyncEventType is the kind of an asynchronous event (enum
// ibv_event_type; the values are libibverbs').
type AsyncEventType uint32

// Asynchronous events the engine raises.
const (
	EventCQErr            AsyncEventType = 0  // IBV_EVENT_CQ_ERR: a completion was lost (CQ overrun)
	EventQPFatal          AsyncEventType = 1  // IBV_EVENT_QP_FATAL
	EventSQDrained        AsyncEventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPortActive       AsyncEventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // IBV_EVENT_PORT_ERR
	EventSRQLimitReached  AsyncEventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED
)

func (t AsyncEventType) String() string {
	switch t {
	case EventCQErr:
		return "CQ_ERR"
	case EventQPFatal:
		return "QP_FATAL"
	case EventSQDrained:
		return "SQ_DRAINED"
	case EventPortActive:
		return "PORT_ACTIVE"
	case EventPortErr:
		return "PORT_ERR"
	case EventSRQLimitReached:
		return "SRQ_LIMIT_REACHED"
	case EventQPLastWQEReached:
		return "QP_LAST_WQE_REACHED"
	}
	return "AsyncEventType(" + strconv.Itoa(int(t)) + ")"
}

// AsyncEvent is one asynchronous event (struct ibv_async_event): the
// element it concerns is set according to Type.
type AsyncEvent struct {
	Type AsyncEventType
	QP   *QP  // QP events
	CQ   *CQ  // EventCQErr
	SRQ  *SRQ // EventSRQLimitReached
	Port int  // port events (always 1)
}

// asyncQueueLen bounds the events waiting to be read from AsyncEvents;
// beyond it events are counted in AsyncEventsLost and dropped.
const asyncQueueLen = 1024

// AsyncEvents returns the channel of the device's asynchronous events
// (ibv_get_async_event). Events are queued, never blocking the engine;
// an application that does not read them loses the newest ones (counted
// in Counters.AsyncEventsLost). The channel is never closed.
func (d *Device) AsyncEvents() <-chan AsyncEvent { return d.async }

// raise queues ev without blocking. Safe from any goroutine.
func (d *Device) raise(ev AsyncEvent) {
	select {
	case d.async <- ev:
		d.ctr.asyncEvents.Add(1)
	default:
		d.ctr.asyncEventsLost.Add(1)
	}
}
