//go:build unix

package api

import "syscall"

const nonBlockingWrites = true

// writeNow writes as much of p as the socket takes without waiting.
func (s *streamSocket) writeNow(p []byte) (int, error) {
	var n int
	var werr error
	err := s.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := syscall.Write(int(fd), p[n:])
			if m > 0 {
				n += m
			}
			if e == syscall.EINTR {
				continue
			}
			if e != nil && e != syscall.EAGAIN {
				werr = e
			}
			if e != nil || m <= 0 {
				break
			}
		}
		return true // done: never wait for the socket here
	})
	if err != nil {
		return n, err
	}
	return n, werr
}
