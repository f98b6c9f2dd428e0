package fabric

import (
	"net"
	"sort"
	"sync"
	"sync/atomic"
)

// fdbKey packs a VLAN and a MAC into a map key: VLAN in bits 59:48, MAC
// in bits 47:0.
type fdbKey uint64

func makeKey(vlan uint16, mac []byte) fdbKey {
	_ = mac[5]
	return fdbKey(uint64(vlan&0xFFF)<<48 | uint64(mac[0])<<40 | uint64(mac[1])<<32 |
		uint64(mac[2])<<24 | uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5]))
}

func (k fdbKey) vlan() uint16 { return uint16(k >> 48) }
func (k fdbKey) mac() net.HardwareAddr {
	return net.HardwareAddr{byte(k >> 40), byte(k >> 32), byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)}
}

type fdbEntry struct {
	port   atomic.Int32
	last   atomic.Int64 // when last seen, ns since the switch's epoch
	static bool
}

// fdb is the filtering database (IEEE 802.1Q 8.8): learnt and static
// entries keyed by VLAN and MAC. Lookups and refreshes of existing
// entries take no lock (a sync.Map's loads write nothing shared, where an
// RWMutex's reader count is a cache line every rx goroutine writes per
// frame; the entry's fields are atomic); a new entry, a sweep or a flush
// take mu. Safe for concurrent use.
type fdb struct {
	mu      sync.Mutex
	m       sync.Map // fdbKey -> *fdbEntry
	learned int      // dynamic entries, bounded by max; under mu
	max     int      // bound on dynamic entries
	aging   int64    // ns
	full    atomic.Uint64
}

func newFDB(maxEntries int, agingNS int64) *fdb {
	return &fdb{max: maxEntries, aging: agingNS}
}

func (d *fdb) addStatic(k fdbKey, port int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := &fdbEntry{static: true}
	e.port.Store(int32(port))
	if old, loaded := d.m.Swap(k, e); loaded && !old.(*fdbEntry).static {
		d.learned--
	}
}

// get returns the entry of k, or nil.
func (d *fdb) get(k fdbKey) *fdbEntry {
	if v, ok := d.m.Load(k); ok {
		return v.(*fdbEntry)
	}
	return nil
}

// learn records that k was seen on port at now.
func (d *fdb) learn(k fdbKey, port int, now int64) {
	if e := d.get(k); e != nil {
		if e.static {
			return
		}
		if e.port.Load() != int32(port) {
			e.port.Store(int32(port)) // the station moved
		}
		if e.last.Load() != now {
			e.last.Store(now)
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.get(k); e != nil { // learnt meanwhile by another port
		if !e.static {
			e.port.Store(int32(port))
			e.last.Store(now)
		}
		return
	}
	if d.learned >= d.max {
		d.full.Add(1)
		return
	}
	e := &fdbEntry{}
	e.port.Store(int32(port))
	e.last.Store(now)
	d.m.Store(k, e)
	d.learned++
}

// lookup returns the port k was learnt on, ignoring entries older than
// the aging time (the sweep deletes them later).
func (d *fdb) lookup(k fdbKey, now int64) (int, bool) {
	e := d.get(k)
	if e == nil || (!e.static && now-e.last.Load() >= d.aging) {
		return -1, false
	}
	return int(e.port.Load()), true
}

// sweep deletes expired dynamic entries.
func (d *fdb) sweep(now int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m.Range(func(k, v any) bool {
		if e := v.(*fdbEntry); !e.static && now-e.last.Load() >= d.aging {
			d.m.Delete(k)
			d.learned--
		}
		return true
	})
}

// flushPort deletes the dynamic entries of a port (it went down).
func (d *fdb) flushPort(port int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m.Range(func(k, v any) bool {
		if e := v.(*fdbEntry); !e.static && int(e.port.Load()) == port {
			d.m.Delete(k)
			d.learned--
		}
		return true
	})
}

// FDBEntry is one entry of a switch's FDB in status output.
type FDBEntry struct {
	VLAN   int     `json:"vlan"`
	MAC    string  `json:"mac"`
	Port   int     `json:"port"`
	Static bool    `json:"static"`
	Age    float64 `json:"age_seconds"` // since last seen; 0 for static entries
}

func (d *fdb) snapshot(now int64) []FDBEntry {
	var out []FDBEntry
	d.m.Range(func(kv, v any) bool { // safe beside writers; no lock
		k, e := kv.(fdbKey), v.(*fdbEntry)
		if !e.static && now-e.last.Load() >= d.aging {
			return true
		}
		fe := FDBEntry{VLAN: int(k.vlan()), MAC: k.mac().String(), Port: int(e.port.Load()) + 1, Static: e.static}
		if !e.static {
			fe.Age = float64(now-e.last.Load()) / 1e9
		}
		out = append(out, fe)
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].VLAN != out[j].VLAN {
			return out[i].VLAN < out[j].VLAN
		}
		return out[i].MAC < out[j].MAC
	})
	return out
}
