package ctlsock

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

type testStatus struct {
	Calls int64  `json:"calls"`
	Name  string `json:"name"`
}

func TestListenQuery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	var calls atomic.Int64
	s, err := Listen(path, "test", func() testStatus { return testStatus{Calls: calls.Add(1), Name: "a"} })
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	for want := int64(1); want <= 2; want++ {
		st, err := Query[testStatus](context.Background(), path, "test", "hinic test serve")
		if err != nil || st != (testStatus{Calls: want, Name: "a"}) {
			t.Fatalf("query %d: %+v, %v", want, st, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err == nil {
		t.Error("socket file left behind")
	}
	_, err = Query[testStatus](context.Background(), path, "test", "hinic test serve")
	if err == nil || !strings.Contains(err.Error(), "test: control socket "+path) || !strings.Contains(err.Error(), "is `hinic test serve` running?") {
		t.Errorf("without a server: %v", err)
	}
	if _, err := Listen(filepath.Join(t.TempDir(), "none", "c.sock"), "test", func() int { return 0 }); err == nil ||
		!strings.HasPrefix(err.Error(), "test: control socket: ") {
		t.Errorf("listen in a missing directory: %v", err)
	}
}

// TestQueryBadAnswer: a server that sends what is not the status is an
// error naming the socket, not a zero status.
func TestQueryBadAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte(`{"calls":"many"}`))
			c.Close()
		}
	}()
	st, err := Query[testStatus](context.Background(), path, "test", "hinic test serve")
	if err == nil || !strings.Contains(err.Error(), "test: status from "+path) || st != (testStatus{}) {
		t.Errorf("%+v, %v", st, err)
	}
}

func TestGuestState(t *testing.T) {
	const live, fatal = 0x2, 0x4
	for _, tc := range []struct {
		ds, code uint32
		state    string
		wantCode uint32
	}{
		{0, 9, StateReady, 0},
		{0x1, 9, StateReady, 0},
		{0x1 | live, 9, StateLive, 0},
		{live | fatal, 9, StateFatal, 9},
		{fatal, 0, StateFatal, 0},
	} {
		ds, code := tc.ds, tc.code
		if s, c := GuestState(&ds, &code, live, fatal); s != tc.state || c != tc.wantCode {
			t.Errorf("dev_status %#x: %s %d, want %s %d", tc.ds, s, c, tc.state, tc.wantCode)
		}
	}
}
