package router

import (
	"os"
	"sync"
)

// readRSS reads the process's resident set from /proc/self/statm (its
// second field, in pages); ok is false where the file is absent (not Linux)
// or unreadable. It allocates nothing after the first call.
func readRSS() (bytes int64, ok bool) {
	statm.Lock()
	defer statm.Unlock()
	if statm.f == nil {
		f, err := os.Open("/proc/self/statm")
		if err != nil {
			return 0, false
		}
		statm.f = f
	}
	// A /proc file is generated anew by each read from offset 0.
	n, err := statm.f.ReadAt(statm.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	pages, ok := statmResident(statm.buf[:n])
	if !ok {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// statm is the open /proc/self/statm and readRSS's buffer (statm's seven
// numbers fit in it).
var statm struct {
	sync.Mutex
	f   *os.File
	buf [128]byte
}

// statmResident parses statm's second field ("size resident shared ...").
func statmResident(b []byte) (pages int64, ok bool) {
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	i++
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		pages = pages*10 + int64(b[i]-'0')
	}
	return pages, i > start && i < len(b) && (b[i] == ' ' || b[i] == '\n')
}
