//go:build linux && cgo

package main

import "testing"

// An operator's own glibc tuning wins over the bound serve would apply.
func TestBoundCAllocatorLeavesAnOperatorsSettings(t *testing.T) {
	for _, env := range []string{"MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "4")
			if boundCAllocator() {
				t.Fatalf("bounded the C allocator although the operator set %s", env)
			}
		})
	}
}
