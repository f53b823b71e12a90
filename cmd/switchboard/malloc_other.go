//go:build !linux || !cgo

package main

// boundCAllocator does nothing without glibc.
func boundCAllocator() bool { return false }
