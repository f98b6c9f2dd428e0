package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procStat returns a process's command name, state and parent pid from
// /proc/PID/stat; ok is false when the process is gone.
func procStat(pid int) (comm string, state byte, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	// comm is in parentheses and may hold spaces or parentheses itself.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+4 > len(s) {
		return "", 0, 0, false
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 2 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return s[open+1 : end], f[0][0], ppid, true
}

// Children returns the pids of the running children of pid whose
// command name (/proc/PID/comm, at most 15 bytes) starts with comm.
func Children(pid int, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, state, pp, ok := procStat(p); ok && pp == pid && state != 'Z' && strings.HasPrefix(c, comm) {
			out = append(out, p)
		}
	}
	return out
}

// Running reports whether pid is a process that runs: not gone and not
// a zombie (an orphan waits as one when nothing reaps it). Its command
// name must still start with comm, so that a reused pid does not count.
func Running(pid int, comm string) bool {
	c, state, _, ok := procStat(pid)
	return ok && state != 'Z' && strings.HasPrefix(c, comm)
}
