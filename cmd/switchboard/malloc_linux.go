//go:build linux && cgo

package main

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

// switchboard_bound_c_allocator caps glibc's arenas at two and sends
// allocations of 128 KiB and more to mmap, so that librdkafka's freed
// message buffers are returned to the system rather than kept in arenas.
// It returns 1 when it applied, 0 on another C library.
static int switchboard_bound_c_allocator(void) {
#ifdef __GLIBC__
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	return 1;
#else
	return 0;
#endif
}

*/
import "C"

import "os"

// boundCAllocator holds the C allocator to what the process's memory
// budget can afford (router.memory_limit_bytes): glibc kept librdkafka's
// freed 1 MB buffers, 161 MiB outside Go with nothing pending after 1,000
// answers of 1 MB (BENCHMARKS.md, issue 13). An operator's own
// MALLOC_ARENA_MAX or MALLOC_MMAP_THRESHOLD_ wins. It must run before the
// Kafka clients start their threads.
func boundCAllocator() bool {
	if _, set := os.LookupEnv("MALLOC_ARENA_MAX"); set {
		return false
	}
	if _, set := os.LookupEnv("MALLOC_MMAP_THRESHOLD_"); set {
		return false
	}
	return C.switchboard_bound_c_allocator() == 1
}
