package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Where Go's heap arenas are mapped on linux/amd64: the runtime reserves
// them at a hint far below where the kernel places other mappings
// (glibc's malloc arenas, thread stacks, C's mmap: top down from
// 0x7f...), and above the binary and its brk heap; since Go 1.26 the hint
// is random, so the bounds are wide. Anonymous memory outside them is the
// runtime's own metadata, C's (librdkafka; pebble's block cache and
// memtables, which it allocates with C's malloc under cgo) and the
// binary's data.
const goArenasFrom, goArenasTo = 0x100000000, 0x7e0000000000

// describeMemory prints what a process holds resident, split into Go's
// heap arenas, other anonymous memory and files (from /proc/PID/smaps), and
// the Go heap in use as the instance's /metrics (at url) reports it.
func describeMemory(pid int, url string) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var goKB, anonKB, fileKB int64
	kind := &anonKB
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			_, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil { // a mapping's header
				switch {
				case start >= goArenasFrom && start < goArenasTo:
					kind = &goKB
				case len(fields) >= 6 && !strings.HasPrefix(fields[5], "["):
					kind = &fileKB
				default:
					kind = &anonKB
				}
				continue
			}
		}
		if fields[0] == "Rss:" && len(fields) >= 2 {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			*kind += kb
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	mb := func(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)*1024/1e6) } // smaps' kB are KiB
	fmt.Printf("rss %s = go arenas %s + other anon %s + files %s", mb(goKB+anonKB+fileKB), mb(goKB), mb(anonKB), mb(fileKB))
	if url != "" {
		m, err := goMetrics(url)
		if err != nil {
			return err
		}
		fmt.Printf("; go heap in use %.1f MB, go sys %.1f MB", m["go_memstats_heap_inuse_bytes"]/1e6, m["go_memstats_sys_bytes"]/1e6)
	}
	fmt.Println()
	return nil
}

// goMetrics reads the go_memstats gauges of an instance's /metrics.
func goMetrics(url string) (map[string]float64, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(name, "go_memstats_") {
			out[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out, nil
}
