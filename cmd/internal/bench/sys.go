package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime is this process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes is this process's resident set size now (Linux; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// hostCPU is the machine's busy and total CPU time in clock ticks, from
// /proc/stat (Linux; ok is false elsewhere).
type hostCPU struct {
	busy, total uint64
	ok          bool
}

func readHostCPU() hostCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}
	}
	first, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(first)
	if len(fields) < 5 || fields[0] != "cpu" {
		return hostCPU{}
	}
	var h hostCPU
	for i, v := range fields[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return hostCPU{}
		}
		if i >= 8 { // guest time is already counted in user time
			break
		}
		h.total += n
		if i != 3 && i != 4 { // idle, iowait
			h.busy += n
		}
	}
	h.ok = true
	return h
}

// busySince is the fraction of all the machine's cores busy since h0.
func (h hostCPU) busySince(h0 hostCPU) float64 {
	if !h.ok || !h0.ok || h.total <= h0.total {
		return 0
	}
	return float64(h.busy-h0.busy) / float64(h.total-h0.total)
}

// machine describes where a bench ran.
type machine struct {
	CPUs   int    `json:"cpus"`
	Model  string `json:"cpu_model,omitempty"`
	MemGiB int    `json:"memory_gib,omitempty"`
	OS     string `json:"os"`
	Kernel string `json:"kernel,omitempty"`
	Go     string `json:"go"`
}

func thisMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.MemGiB = int((kb + 1<<19) >> 20)
				}
				break
			}
		}
	}
	return m
}
