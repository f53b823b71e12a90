//go:build !unix

package api_test

import "errors"

func raiseFDLimit(uint64) (uint64, error) { return 0, errors.New("no RLIMIT_NOFILE here") }
