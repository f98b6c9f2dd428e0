package rdma

// AsyncEventType is the kind of an asynchronous event (enum
// ibv_event_type; the values are libibverbs').
type AsyncEventType uint32

// Asynchronous events the engine raises. The line comments are the texts
// String returns (stringer -linecomment): libibverbs' names without
// IBV_EVENT_.
const (
	// EventCQErr: a completion was lost (CQ overrun).
	EventCQErr            AsyncEventType = 0  // CQ_ERR
	EventQPFatal          AsyncEventType = 1  // QP_FATAL
	EventSQDrained        AsyncEventType = 5  // SQ_DRAINED
	EventPortActive       AsyncEventType = 9  // PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // PORT_ERR
	EventSRQLimitReached  AsyncEventType = 15 // SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = 16 // QP_LAST_WQE_REACHED
)

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
