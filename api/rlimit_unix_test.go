//go:build unix

package api_test

import "syscall"

// raiseFDLimit raises this process's limit on open files to want if it may
// (root may raise the hard limit too), else to the hard limit, and returns
// the new soft limit.
func raiseFDLimit(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= want {
		return l.Cur, nil
	}
	if l.Max < want {
		up := syscall.Rlimit{Cur: want, Max: want}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up); err == nil {
			return want, nil
		}
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}
