package fabric

import (
	"errors"
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// Sentinel errors.
var (
	// ErrClosed is returned by operations on a closed fabric or switch.
	ErrClosed = errors.New("fabric: closed")
	// ErrPortBusy means another peer holds the port.
	ErrPortBusy = errors.New("fabric: port busy")
	// ErrNoFabric means no fabric answers on the control socket.
	ErrNoFabric = errors.New("fabric: no fabric is serving")
)

// HelloError is a hello answered with a non-zero status.
type HelloError struct {
	Status uint16
}

func (e *HelloError) Error() string {
	return fmt.Sprintf("fabric: hello refused: %s (status %d)", proto.HelloStatusText(e.Status), e.Status)
}

// Is makes errors.Is(err, ErrPortBusy) hold for a port-busy answer.
func (e *HelloError) Is(target error) bool {
	return target == ErrPortBusy && e.Status == proto.HelloPortBusy
}
