//go:build !unix

package router_test

// processCPU is not measured here: benchmarks report 0 CPU time.
func processCPU() int64 { return 0 }
