package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		kind     Kind
		err      bool
	}{
		{"greeting", `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}`, KindGreeting, false},
		{"return", `{"return": {}, "id": "hinic-1"}`, KindReturn, false},
		{"error", `{"id": "hinic-2", "error": {"class": "DeviceNotFound", "desc": "Device 'x' not found"}}`, KindError, false},
		{"event", `{"timestamp": {"seconds": 1765000000, "microseconds": 5}, "event": "DEVICE_DELETED", "data": {"device": "hicain0", "path": "/machine/peripheral/hicain0"}}`, KindEvent, false},
		{"two kinds", `{"return": {}, "event": "X"}`, 0, true},
		{"none", `{"id": "a"}`, 0, true},
		{"not an object", `[1,2]`, 0, true},
		{"number id", `{"return": 1, "id": 7}`, 0, true},
		{"truncated", `{"return": {`, 0, true},
		{"null error", `{"error": null}`, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse([]byte(c.in))
			if c.err {
				if !errors.Is(err, ErrMessage) {
					t.Fatalf("Parse(%s) = %+v, %v; want ErrMessage", c.in, m, err)
				}
				return
			}
			if err != nil || m.Kind != c.kind {
				t.Fatalf("Parse(%s) = kind %d, %v; want kind %d", c.in, m.Kind, err, c.kind)
			}
		})
	}
	m, _ := Parse([]byte(`{"timestamp": {"seconds": 1765000000, "microseconds": 5}, "event": "DEVICE_DELETED", "data": {"device": "hicain0"}}`))
	if m.Event != "DEVICE_DELETED" || !DeviceDeleted("hicain0")(m.Data) || DeviceDeleted("ivs0")(m.Data) ||
		m.Time.Unix() != 1765000000 {
		t.Errorf("event = %+v", m)
	}
	m, _ = Parse([]byte(`{"id": "hinic-2", "error": {"class": "GenericError", "desc": "boom"}}`))
	if m.ID != "hinic-2" || m.Error.Error() != "qmp: GenericError: boom" {
		t.Errorf("error = %+v", m)
	}
}

// FuzzParse: any bytes parse to one kind of message or fail with
// ErrMessage, never panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"QMP": {"version": {}, "capabilities": []}}`,
		`{"return": {}, "id": "hinic-1"}`,
		`{"error": {"class": "GenericError", "desc": "x"}, "id": "hinic-3"}`,
		`{"event": "DEVICE_DELETED", "data": {"device": "hicain0"}, "timestamp": {"seconds": -1, "microseconds": 9999999}}`,
		`{"return": [], "event": "X"}`,
		`{"id": {"a": 1}, "return": 0}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMessage) {
				t.Fatalf("error %v is not ErrMessage", err)
			}
			return
		}
		switch m.Kind {
		case KindGreeting, KindReturn, KindEvent:
		case KindError:
			if m.Error == nil {
				t.Fatal("KindError without an Error")
			}
		default:
			t.Fatalf("kind %d", m.Kind)
		}
	})
}

// fakeQEMU serves one QMP connection on a UNIX socket: the greeting,
// then script(cmd) for each command, whose lines it sends back.
func fakeQEMU(t *testing.T, script func(cmd map[string]any) []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(`{"QMP": {"version": {"qemu": {"major": 7, "minor": 2, "micro": 0}}, "capabilities": ["oob"]}}` + "\r\n"))
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var cmd map[string]any
			if json.Unmarshal(sc.Bytes(), &cmd) != nil {
				return
			}
			for _, l := range script(cmd) {
				l = strings.ReplaceAll(l, "ID", cmd["id"].(string))
				if _, err := c.Write([]byte(l + "\r\n")); err != nil {
					return
				}
			}
		}
	}()
	return path
}

func TestClient(t *testing.T) {
	var got []string
	path := fakeQEMU(t, func(cmd map[string]any) []string {
		got = append(got, cmd["execute"].(string))
		switch cmd["execute"] {
		case "qmp_capabilities":
			return []string{`{"return": {}, "id": "ID"}`}
		case "device_del":
			// The event may come before the return, as in QEMU.
			return []string{
				`{"event": "DEVICE_DELETED", "data": {"path": "/machine/peripheral/hicain0/virtio-backend"}, "timestamp": {"seconds": 1, "microseconds": 0}}`,
				`{"return": {}, "id": "ID"}`,
				`{"event": "DEVICE_DELETED", "data": {"device": "hicain0", "path": "/machine/peripheral/hicain0"}, "timestamp": {"seconds": 1, "microseconds": 1}}`,
			}
		case "chardev-remove":
			return []string{`{"id": "ID", "error": {"class": "GenericError", "desc": "Chardev 'ivs9' not found"}}`}
		}
		return []string{`{"return": {"x": 1}, "id": "ID"}`}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute(ctx, "device_del", map[string]string{"id": "hicain0"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.WaitEvent(ctx, "DEVICE_DELETED", DeviceDeleted("hicain0"))
	if err != nil || !DeviceDeleted("hicain0")(m.Data) {
		t.Fatalf("WaitEvent = %+v, %v", m, err)
	}
	_, err = c.Execute(ctx, "chardev-remove", map[string]string{"id": "ivs9"})
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "GenericError" {
		t.Fatalf("chardev-remove error = %v", err)
	}
	r, err := c.Execute(ctx, "query-status", nil)
	if err != nil || string(r) != `{"x": 1}` {
		t.Fatalf("query-status = %s, %v", r, err)
	}
	if strings.Join(got, " ") != "qmp_capabilities device_del chardev-remove query-status" {
		t.Errorf("commands %v", got)
	}
	// Nothing more comes: the wait ends with the context.
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if _, err := c.WaitEvent(short, "DEVICE_DELETED", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitEvent on silence = %v, want the deadline", err)
	}
}

func TestDialNoGreeting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte(`{"return": {}}` + "\n"))
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, path); !errors.Is(err, ErrNoGreet) {
		t.Fatalf("Dial = %v, want ErrNoGreet", err)
	}
}

func TestFindPCI(t *testing.T) {
	r := json.RawMessage(`[{"bus": 0, "devices": [
		{"bus": 0, "slot": 1, "function": 1, "qdev_id": ""},
		{"bus": 0, "slot": 4, "function": 0, "qdev_id": "hicain0", "class_info": {"class": 1280}}]}]`)
	a, err := findPCI(r, "hicain0")
	if err != nil || a != (PCIAddr{Bus: 0, Slot: 4, Function: 0}) || a.String() != "4.0" {
		t.Fatalf("findPCI = %+v %q, %v", a, a.String(), err)
	}
	if _, err := findPCI(r, "gpu0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("findPCI(gpu0) = %v, want ErrNoDevice", err)
	}
	if _, err := findPCI(json.RawMessage(`{"bus": 0}`), "x"); !errors.Is(err, ErrMessage) {
		t.Errorf("findPCI of an object = %v, want ErrMessage", err)
	}
}

// TestAddIvshmem: the commands of a plug, in order, with their
// arguments as QEMU 7.2 takes them (device_add's vectors a number), and
// a refused device_add that takes its chardev back.
func TestAddIvshmem(t *testing.T) {
	var got []string
	path := fakeQEMU(t, func(cmd map[string]any) []string {
		a, _ := json.Marshal(cmd["arguments"])
		got = append(got, cmd["execute"].(string)+" "+string(a))
		if cmd["execute"] == "device_add" && strings.Contains(string(a), "hicain2") {
			return []string{`{"id": "ID", "error": {"class": "GenericError", "desc": "no slot"}}`}
		}
		return []string{`{"return": {}, "id": "ID"}`}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := Ivshmem{ID: "hicain1", Chardev: "ivs1", Socket: "/r/vm-a/ivshmem.sock", Vectors: 8, Bus: "pci.0"}
	if err := c.AddIvshmem(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.ID, f.Chardev = "hicain2", "ivs2"
	if err := c.AddIvshmem(ctx, f); err == nil || !strings.Contains(err.Error(), "no slot") {
		t.Errorf("refused device_add: %v", err)
	}
	want := []string{
		`qmp_capabilities null`,
		`chardev-add {"backend":{"data":{"addr":{"data":{"path":"/r/vm-a/ivshmem.sock"},"type":"unix"},"server":false},"type":"socket"},"id":"ivs1"}`,
		`device_add {"bus":"pci.0","chardev":"ivs1","driver":"ivshmem-doorbell","id":"hicain1","vectors":8}`,
		`chardev-add {"backend":{"data":{"addr":{"data":{"path":"/r/vm-a/ivshmem.sock"},"type":"unix"},"server":false},"type":"socket"},"id":"ivs2"}`,
		`device_add {"bus":"pci.0","chardev":"ivs2","driver":"ivshmem-doorbell","id":"hicain2","vectors":8}`,
		`chardev-remove {"id":"ivs2"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
