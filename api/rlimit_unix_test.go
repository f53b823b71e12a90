//go:build unix

package api_test

import "syscall"

// raiseFDLimit raises this process's soft limit on open files to its hard
// limit and returns the new soft limit.
func raiseFDLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, err
		}
	}
	return l.Cur, nil
}
