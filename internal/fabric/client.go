package fabric

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// DialPort connects to a HiSwitch port socket the way an emulated NIC
// (or a switch dialling an inter-switch link) does: it sends hello,
// reads the switch's answer and returns the connection, ready for one
// frame per message, with the answer. An answer with a non-zero status
// is a *HelloError (errors.Is(err, ErrPortBusy) for a busy port) and the
// connection is closed.
func DialPort(ctx context.Context, path string, hello *proto.HelloFields) (*net.UnixConn, proto.Hello, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, nil, fmt.Errorf("fabric: dial %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		uc.SetDeadline(dl)
	} else {
		uc.SetDeadline(time.Now().Add(helloTimeout))
	}
	if _, err := uc.Write(proto.AppendHello(nil, hello)); err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello to %s: %w", path, err)
	}
	buf := make([]byte, proto.HelloMaxSize+1)
	n, _, flags, _, err := uc.ReadMsgUnix(buf, nil)
	if err == nil && n == 0 {
		err = fmt.Errorf("connection closed")
	}
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, err)
	}
	if flags&syscall.MSG_TRUNC != 0 {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, proto.ErrMalformed)
	}
	ans, err := proto.ParseHello(buf[:n])
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("fabric: hello from %s: %w", path, err)
	}
	if ans.Status() != proto.HelloOK {
		uc.Close()
		return nil, ans, &HelloError{Status: ans.Status()}
	}
	if !stop() {
		uc.Close()
		return nil, nil, ctx.Err()
	}
	uc.SetDeadline(time.Time{})
	return uc, ans, nil
}
