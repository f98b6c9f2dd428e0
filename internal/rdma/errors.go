package rdma

import (
	"errors"
	"strconv"
)

// Sentinel errors of the verbs API. Setup calls wrap them with context
// ("rdma: modify QP 0x11 INIT->RTR: ..."); compare with errors.Is. The
// comments give the errno libibverbs would return, which is what the device
// backend reports to the guest.
var (
	// ErrClosed: the device has been closed (ENODEV).
	ErrClosed = errors.New("rdma: device closed")
	// ErrInvalid: an argument or attribute is invalid (EINVAL).
	ErrInvalid = errors.New("rdma: invalid argument")
	// ErrInvalidState: the object is in the wrong state for the call
	// (EINVAL), e.g. posting a send to a QP in INIT.
	ErrInvalidState = errors.New("rdma: invalid state")
	// ErrNoResources: a table or queue is full (ENOMEM), e.g. a work
	// request would overflow the send queue.
	ErrNoResources = errors.New("rdma: out of resources")
	// ErrBusy: the object is still in use (EBUSY), e.g. deallocating a PD
	// that has MRs.
	ErrBusy = errors.New("rdma: resource busy")
	// ErrUnsupported: the device does not support the operation (EOPNOTSUPP), e.g.
	// alternate paths, memory windows, SEND_WITH_INV.
	ErrUnsupported = errors.New("rdma: operation not supported")
)

// PostError is returned by PostSend and PostRecv for the first work request
// that could not be posted, like ibv_post_send's bad_wr: the requests before
// Index were posted, the ones from Index on were not.
type PostError struct {
	Index int   // index of the rejected work request in the slice
	Err   error // why, wrapping one of the sentinel errors
}

func (e *PostError) Error() string {
	return "rdma: work request " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

func (e *PostError) Unwrap() error { return e.Err }
