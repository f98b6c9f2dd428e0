package live_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rackview"
	"github.com/PacketFive/hinic/internal/rackview/live"
	"github.com/PacketFive/hinic/internal/testutil"
)

// The live page in a real browser: Debian's chromium, headless, driven
// over the Chrome DevTools Protocol (CDP) on a websocket.

// chromiumPath finds the browser, or skips (fails under
// HINIC_REQUIRE_TOOLS=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testutil.RequireTool(t, "chromium", "apt-get install chromium; scripts/deps.sh installs it", false)
	return ""
}

// browser is one headless chromium and a DevTools connection to its page.
type browser struct {
	t    *testing.T
	ws   *websocket.Conn
	mu   sync.Mutex
	next int
}

// startBrowser runs chromium with a private profile and attaches to its
// first page.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromiumPath(t)
	profile := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
		"--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage",
		"--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir="+profile,
		"--window-size=1600,1000", "about:blank")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	// chromium writes its DevTools port and browser path to the profile.
	var port string
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		if err == nil && bytes.Count(b, []byte("\n")) >= 1 {
			port = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromium did not open its DevTools port in 60 s:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	for i := 0; ; i++ {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
		}
		if err != nil {
			t.Fatalf("DevTools target list: %v", err)
		}
		if len(targets) > 0 && targets[0].Type == "page" || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var wsURL string
	for _, tg := range targets {
		if tg.Type == "page" {
			wsURL = tg.WS
			break
		}
	}
	if wsURL == "" {
		t.Fatalf("no page among the DevTools targets %+v", targets)
	}
	ws, err := websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatalf("DevTools websocket: %v", err)
	}
	ws.MaxPayloadBytes = 64 << 20 // screenshots
	t.Cleanup(func() { ws.Close() })
	return &browser{t: t, ws: ws}
}

// call sends one CDP command and returns its result, skipping the events
// that arrive meanwhile.
func (b *browser) call(method string, params any, result any) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := b.next
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	_ = b.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(b.ws, &msg); err != nil {
			b.t.Fatalf("%s: %v", method, err)
		}
		if msg.ID != id {
			continue
		}
		if msg.Error != nil {
			b.t.Fatalf("%s: %s", method, msg.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(msg.Result, result); err != nil {
				b.t.Fatalf("%s: %v", method, err)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value (which must be JSON-serialisable) into v.
func (b *browser) eval(expr string, v any) {
	b.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res)
	if res.Exception != nil {
		b.t.Fatalf("%s: %s", expr, res.Exception.Text)
	}
	if err := json.Unmarshal(res.Result.Value, v); err != nil {
		b.t.Fatalf("%s: %v (%s)", expr, err, res.Result.Value)
	}
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url}, nil)
	b.waitFor("the page to load", 30*time.Second, func() bool {
		var state string
		b.eval("document.readyState", &state)
		return state == "complete"
	})
}

func (b *browser) waitFor(what string, d time.Duration, ok func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot saves the page as PNG in the test's artifact directory
// and, when HINIC_ARTIFACTS is set, under it too.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	var res struct {
		Data string `json:"data"`
	}
	// The whole page, beyond the window if it is taller.
	var lm struct {
		Size struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	b.call("Page.getLayoutMetrics", map[string]any{}, &lm)
	params := map[string]any{"format": "png"}
	if lm.Size.Width > 0 && lm.Size.Height > 0 {
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": lm.Size.Width, "height": lm.Size.Height, "scale": 1}
	}
	b.call("Page.captureScreenshot", params, &res)
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		b.t.Fatalf("screenshot %s: not a PNG (%v)", name, err)
	}
	dirs := []string{b.t.ArtifactDir()}
	if root := os.Getenv("HINIC_ARTIFACTS"); root != "" {
		dirs = append(dirs, filepath.Join(root, strings.ReplaceAll(b.t.Name(), "/", "_")))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot: %s", p)
	}
}

// rampSource counts up faster at every sample, so that the rates, and
// the text showing them, change from one event to the next.
type rampSource struct {
	mu sync.Mutex
	k  uint64
	n  uint64
}

func (s *rampSource) Sample(context.Context) (live.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.k++
	s.n += 1000 * s.k
	n := s.n
	return live.Sample{
		Ports: []live.PortSample{
			{Switch: "sw0", Port: 1, Up: true, RxFrames: n, TxFrames: n, RxBytes: 4096 * n, TxBytes: 4096 * n},
			{Switch: "sw0", Port: 2, Up: true, RxFrames: n / 2, TxFrames: n / 2, RxBytes: 2048 * n, TxBytes: 2048 * n},
		},
		Guests: []live.GuestSample{
			{Name: "vm-a", State: "live", LinkUp: true, Doorbells: n, Interrupts: n / 2, L2Tx: 10, L2Rx: 12, RoCERx: n,
				QPs: []live.QP{{QPN: 17, State: "RTS", SQ: uint32(n), RQ: uint32(n)}}},
			{Name: "vm-b", State: "live", LinkUp: true, Doorbells: n / 2, RoCERx: n / 2,
				QPs: []live.QP{{QPN: 18, State: "RTS", SQ: uint32(n / 2), RQ: uint32(n / 2)}}},
		},
	}, nil
}

// pageState is what the test reads off the live page.
type pageState struct {
	SVG     bool   `json:"svg"`
	LED     string `json:"led"`
	Guest   string `json:"guest"`
	TOR     string `json:"tor"`
	Rate    string `json:"rate"`
	Status  string `json:"status"`
	Ports   int    `json:"ports"`
	Guests  int    `json:"guests"`
	QPs     int    `json:"qps"`
	Packets int    `json:"packets"`
}

const readPage = `JSON.parse(JSON.stringify({
  svg: !!document.querySelector("#drawing svg"),
  led: (document.getElementById("port-sw0-1") || {getAttribute: () => ""}).getAttribute("fill"),
  guest: (document.getElementById("led-vm-a") || {getAttribute: () => ""}).getAttribute("fill"),
  tor: (document.getElementById("led-sw0-0") || {getAttribute: () => ""}).getAttribute("fill"),
  rate: (document.getElementById("rate-sw0-1") || {}).textContent || "",
  status: document.getElementById("status").textContent,
  ports: document.querySelectorAll("#ports tbody tr").length,
  guests: document.querySelectorAll("#guests tbody tr").length,
  qps: document.querySelectorAll("#qps tbody tr").length,
  packets: document.querySelectorAll("circle.pkt").length,
}))`

// TestChromiumLivePage loads the live page in headless chromium while a
// fake source's counters climb: the drawing and tables are there, the
// port's rate text and the guest's LED change, packets run along the
// cables, and none does under prefers-reduced-motion.
func TestChromiumLivePage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	b := startBrowser(t)
	srv := &live.Server{Model: rackview.FromSpec(spec(t, "two-hicain")), Source: &rampSource{}, Interval: 300 * time.Millisecond}
	ts := httptest.NewServer(srv.Handler())
	// The page's event stream stays open: cut it, or Close waits for it.
	defer func() {
		ts.CloseClientConnections()
		ts.Close()
	}()

	b.navigate(ts.URL + "/")
	var st pageState
	b.eval(readPage, &st)
	if !st.SVG || st.LED == "" {
		t.Fatalf("the page has no drawing or no LED for sw0 port 1: %+v", st)
	}
	var first pageState
	b.waitFor("a rate under sw0 port 1", 20*time.Second, func() bool {
		b.eval(readPage, &first)
		return strings.Contains(first.Rate, "bit/s") && first.Guests == 2
	})
	if first.Guest != "#30d158" || first.TOR != "#30d158" || first.Ports != 2 || first.QPs != 2 || !strings.HasPrefix(first.Status, "live") {
		t.Errorf("after the first events: %+v", first)
	}
	sawPacket := false
	b.waitFor("the rate to change as the counters climb", 20*time.Second, func() bool {
		var now pageState
		b.eval(readPage, &now)
		sawPacket = sawPacket || now.Packets > 0
		return now.Rate != first.Rate && strings.Contains(now.Rate, "bit/s")
	})
	b.waitFor("a packet on a cable", 10*time.Second, func() bool {
		var now pageState
		b.eval(readPage, &now)
		sawPacket = sawPacket || now.Packets > 0
		return sawPacket
	})
	b.screenshot("live-page.png")

	// Reduced motion: the numbers still change, nothing moves.
	b.call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-reduced-motion", "value": "reduce"}}}, nil)
	b.navigate(ts.URL + "/")
	var rate0 string
	b.waitFor("a rate with reduced motion", 20*time.Second, func() bool {
		var now pageState
		b.eval(readPage, &now)
		rate0 = now.Rate
		return strings.Contains(now.Rate, "bit/s")
	})
	deadline := time.Now().Add(2 * time.Second)
	changed := false
	for time.Now().Before(deadline) || !changed {
		var now pageState
		b.eval(readPage, &now)
		if now.Packets != 0 {
			t.Fatalf("a packet moves under prefers-reduced-motion: %+v", now)
		}
		changed = changed || now.Rate != rate0
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("the rate did not change under reduced motion")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChromiumDrawings opens the drawings in chromium, as a reader of
// the docs would: each loads as SVG, the flows' packets run, and under
// prefers-reduced-motion they are hidden and the parked ones shown.
// Screenshots of the single-rack and two-rack front views are kept.
func TestChromiumDrawings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	b := startBrowser(t)
	draw := map[string][]byte{}
	for _, d := range []struct {
		name, spec string
		fn         func(*bytes.Buffer, *rackview.Model) error
	}{
		{"rack-front", "two-hicain-gpu", func(w *bytes.Buffer, m *rackview.Model) error { return rackview.FrontSVG(w, m) }},
		{"two-racks", "two-ib", func(w *bytes.Buffer, m *rackview.Model) error { return rackview.FrontSVG(w, m) }},
		{"flows", "two-racks-gpu", func(w *bytes.Buffer, m *rackview.Model) error { return rackview.FlowsSVG(w, m) }},
	} {
		var buf bytes.Buffer
		if err := d.fn(&buf, rackview.FromSpec(spec(t, d.spec))); err != nil {
			t.Fatal(err)
		}
		draw[d.name] = buf.Bytes()
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := draw[strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), ".svg")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = w.Write(b)
	}))
	defer ts.Close()

	for _, name := range []string{"rack-front", "two-racks"} {
		b.navigate(ts.URL + "/" + name + ".svg")
		var racks int
		b.eval(`document.documentElement.localName === "svg" ? document.querySelectorAll("g[id^=rack-]").length : -1`, &racks)
		want := map[string]int{"rack-front": 1, "two-racks": 2}[name]
		if racks != want {
			t.Errorf("%s: %d racks drawn, want %d", name, racks, want)
		}
		b.screenshot(name + ".png")
	}

	const display = `[...document.querySelectorAll("circle.pkt, circle.still")].map(c => c.classList[0] + ":" + getComputedStyle(c).display).join(" ")`
	b.navigate(ts.URL + "/flows.svg")
	var shown string
	b.eval(display, &shown)
	if !strings.Contains(shown, "pkt:inline") || strings.Contains(shown, "still:inline") {
		t.Errorf("flows with motion: %s", shown)
	}
	b.screenshot("flows.png")
	b.call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-reduced-motion", "value": "reduce"}}}, nil)
	b.eval(display, &shown)
	if strings.Contains(shown, "pkt:inline") || !strings.Contains(shown, "still:inline") {
		t.Errorf("flows with reduced motion: %s", shown)
	}
	b.screenshot("flows-reduced-motion.png")
}

// TestChromiumLivePageFabric is the live page over real traffic: a
// HiSwitch of this process on the rack's run directory, a peer on port 1
// sending ever larger bursts of frames, one on port 2 receiving them
// (flooded), and the page in chromium reading the fabric through
// live.RunDir as `deploy graph --serve` does: the rates beside both
// blades appear and change.
func TestChromiumLivePageFabric(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	b := startBrowser(t)
	r, _ := startFabric(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dial := func(port int, mac [6]byte) *net.UnixConn {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		defer dcancel()
		c, _, err := fabric.DialPort(dctx, deploy.PortSocket(r, "sw0", port), &proto.HelloFields{Version: proto.HelloVersion,
			LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, MaxFrame: 1514, MAC: mac, PortNum: 1,
			Name: fmt.Sprintf("vm-%c/hicain0", 'a'+port-1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	macA, macB := [6]byte{0x52, 0x54, 0, 0x43, 0, 1}, [6]byte{0x52, 0x54, 0, 0x43, 0, 2}
	a, bconn := dial(1, macA), dial(2, macB)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { // port 2 drains what the switch floods to it
		defer wg.Done()
		buf := make([]byte, 2048)
		for ctx.Err() == nil {
			_ = bconn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = bconn.Read(buf)
		}
	}()
	go func() { // port 1 sends a burst every 100 ms, one frame more each time
		defer wg.Done()
		frame := make([]byte, 1000)
		copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		copy(frame[6:], macA[:])
		frame[12], frame[13] = 0x88, 0xb5 // a local experimental EtherType
		for k := 1; ctx.Err() == nil; k++ {
			for i := 0; i < k; i++ {
				_, _ = a.Write(frame)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	srv := &live.Server{Model: rackview.FromSpec(r), Source: live.RunDir{Rack: r}, Interval: 300 * time.Millisecond}
	ts := httptest.NewServer(srv.Handler())
	defer func() {
		ts.CloseClientConnections()
		ts.Close()
	}()
	b.navigate(ts.URL + "/")
	const rates = `JSON.parse(JSON.stringify([1, 2].map(n => (document.getElementById("rate-sw0-" + n) || {}).textContent || "")))`
	var first []string
	b.waitFor("rates on ports 1 and 2", 30*time.Second, func() bool {
		b.eval(rates, &first)
		return strings.Contains(first[0], "bit/s") && strings.Contains(first[1], "bit/s") && first[0] != "0 bit/s"
	})
	b.waitFor("the rate of port 1 to change", 30*time.Second, func() bool {
		var now []string
		b.eval(rates, &now)
		return now[0] != first[0] && strings.Contains(now[0], "bit/s")
	})
	var ports int
	b.eval(`document.querySelectorAll("#ports tbody tr").length`, &ports)
	if ports != 2 {
		t.Errorf("the ports table has %d rows, want ports 1 and 2", ports)
	}
	b.screenshot("live-page-fabric.png")
}
