//go:build !unix

package api

import "errors"

// Without unix write(2) every connection's writer goroutine writes.
const nonBlockingWrites = false

func (s *streamSocket) writeNow([]byte) (int, error) {
	return 0, errors.New("api: non-blocking writes are not supported here")
}
