// Command lookupbench measures the API's lookup store at scale (issue 17,
// BENCHMARKS.md): it fills a results topic, looks intents up through an
// instance's HTTP API or straight from a store directory, and reports
// latency percentiles. The instance under test is a 'switchboard serve'
// whose http.lookup.dir holds the store; its RSS and its restart-to-ready
// time are read from the process and its log by the caller.
//
//	lookupbench produce --bootstrap B --topic T --n 10000000
//	lookupbench fill --bootstrap B --topic T --dir D
//	lookupbench get --url http://127.0.0.1:59110 --n 10000000 --lookups 200000
//	lookupbench store --dir D --n 10000000 --lookups 200000
//	lookupbench mem --pid P --url http://127.0.0.1:59110
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: lookupbench produce|fill|get|store|mem [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "Kafka bootstrap servers")
	topic := fs.String("topic", "", "the results topic to fill")
	n := fs.Int("n", 10_000_000, "how many results the topic holds (ids bench-000000000 on)")
	url := fs.String("url", "", "the instance's API base URL")
	dir := fs.String("dir", "", "a lookup store directory")
	lookups := fs.Int("lookups", 200_000, "lookups per kind (hit, miss)")
	workers := fs.Int("workers", 8, "concurrent lookups")
	pid := fs.Int("pid", 0, "mem: the process whose memory to describe")
	cacheMB := fs.Int("cache-mb", 0, "store: the block cache in MiB (0: the store's default, as http.lookup.cache_mb)")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(*bootstrap, *topic, *n)
	case "fill":
		err = fill(*bootstrap, *topic, *dir)
	case "mem":
		err = describeMemory(*pid, *url)
	case "get":
		err = measure(*n, *lookups, *workers, httpLookup(*url))
	case "store":
		var s *lookup.Store
		opts := []lookup.Option{lookup.WithLogger(slog.New(slog.DiscardHandler))}
		if *cacheMB > 0 {
			opts = append(opts, lookup.WithCacheBytes(int64(*cacheMB)<<20))
		}
		if s, err = lookup.Open(*dir, opts...); err == nil {
			err = measure(*n, *lookups, *workers, func(id string) (bool, error) {
				_, lerr := s.Lookup(context.Background(), tenantOf(0), id)
				return lerr == nil, ignoreMiss(lerr)
			})
			fmt.Printf("rss: %s; %s; %s\n", rss(), goMemory(), s.MemoryUse())
			_ = s.Close()
		}
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lookupbench:", err)
		os.Exit(1)
	}
}

// result is the i-th benchmark result, received at recv.
func result(i int, recv int64) *schemas.IntentResult {
	return &schemas.IntentResult{
		IntentID: idOf(i), IntentType: "fraud_check", Agent: "scorer", Outcome: schemas.OutcomeAnswered,
		Answer:    schemas.Ptr(schemas.JSON(`{"decision":"approve","score":0.12,"reasons":["history","amount"]}`)),
		SessionID: schemas.Ptr(fmt.Sprintf("session-%07d", i%1_000_000)), Tenant: schemas.Ptr(tenantOf(i)), Attempts: 1,
		Timeline: schemas.Timeline{ReceivedAt: recv, DispatchedAt: schemas.Ptr(recv + 1), AnsweredAt: schemas.Ptr(recv + 40), ResolvedAt: recv + 41, Deadline: recv + 2000},
	}
}

func idOf(i int) string { return fmt.Sprintf("bench-%09d", i) }

// tenantOf returns the tenant of every benchmark intent: one, so that a
// lookup names it.
func tenantOf(int) string { return "bench" }

func ignoreMiss(err error) error {
	if errors.Is(err, api.ErrIntentNotFound) || errors.Is(err, api.ErrLookupCatchingUp) {
		return nil
	}
	return err
}

// produce writes n JSON results of realistic size to topic.
func produce(bootstrap, topic string, n int) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
		"compression.type": "lz4", "queue.buffering.max.messages": 1_000_000, "partitioner": "murmur2_random",
	})
	if err != nil {
		return err
	}
	defer p.Close()
	codec, err := schemas.NewCodec()
	if err != nil {
		return err
	}
	var failed atomic.Int64
	go func() {
		for e := range p.Events() {
			if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				failed.Add(1)
			}
		}
	}()
	now := time.Now().UnixMilli()
	start := time.Now()
	for i := range n {
		id := idOf(i)
		res := result(i, now-int64(n-i))
		v, err := codec.Encode(topic, res)
		if err != nil {
			return err
		}
		for {
			err = p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: []byte(id), Value: v}, nil)
			if err == nil {
				break
			}
			if kerr, ok := err.(kafka.Error); !ok || kerr.Code() != kafka.ErrQueueFull {
				return err
			}
			p.Flush(100)
		}
	}
	for p.Flush(1000) > 0 {
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d records failed", f)
	}
	fmt.Printf("produced %d results to %s in %s\n", n, topic, time.Since(start).Round(time.Millisecond))
	return nil
}

// httpLookup looks an id up through GET /v1/intents/{id}.
func httpLookup(base string) func(id string) (bool, error) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	return func(id string) (bool, error) {
		resp, err := c.Get(base + "/v1/intents/" + id)
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			return true, nil
		case 404:
			return false, nil
		}
		return false, fmt.Errorf("GET %s: %d", id, resp.StatusCode)
	}
}

// measure runs lookups of random existing ids (hits) and of ids that were
// never written (misses) and prints their percentiles.
func measure(n, lookups, workers int, look func(id string) (bool, error)) error {
	for _, kind := range []string{"hit", "miss"} {
		lat := make([]time.Duration, lookups)
		var next atomic.Int64
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		var wrong atomic.Int64
		start := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= lookups {
						return
					}
					id := idOf(rand.IntN(n))
					if kind == "miss" {
						id = fmt.Sprintf("bench-%09d", n+rand.IntN(1_000_000_000-n)) // never written, same shape
					}
					t0 := time.Now()
					found, err := look(id)
					lat[i] = time.Since(t0)
					if err != nil {
						once.Do(func() { firstErr = err })
					}
					if found != (kind == "hit") {
						wrong.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		took := time.Since(start)
		slices.Sort(lat)
		pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
		fmt.Printf("%-4s lookups=%d workers=%d wrong=%d rate=%.0f/s p50=%s p90=%s p99=%s max=%s\n", kind, lookups, workers, wrong.Load(),
			float64(lookups)/took.Seconds(), pct(0.50).Round(time.Microsecond/10), pct(0.90).Round(time.Microsecond/10),
			pct(0.99).Round(time.Microsecond/10), lat[len(lat)-1].Round(time.Microsecond))
		if wrong.Load() > 0 {
			return fmt.Errorf("%d %s lookups answered wrongly", wrong.Load(), kind)
		}
	}
	return nil
}

// fill writes the store in dir through the Materializer, as a rebuild from
// topic (a results topic <prefix>.result, with <prefix>.timeout and
// <prefix>.pending beside it) would, but from records generated here in
// place of the topic's (as many per partition as the topic holds, the ids
// of 'produce'), without Kafka's fetch: the store then holds the topic's
// identity and ends, so that an instance started on it resumes through the
// real path.
func fill(bootstrap, topic, dir string) error {
	prefix := strings.TrimSuffix(topic, ".result")
	codec, err := schemas.NewCodec()
	if err != nil {
		return err
	}
	store, err := lookup.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	src := &generated{real: kafkaio.Settings{Bootstrap: bootstrap, ClientID: "lookupbench"}, results: topic, codec: codec}
	m, err := lookup.NewMaterializer(lookup.Config{
		Results: topic, Timeouts: prefix + ".timeout", Pending: prefix + ".pending",
		// Bigger batches than an instance's (10,000 records or 1 s against
		// 1,000 or 10 ms): the same Batch API, fewer commits.
		Store: store, Source: src, Codec: codec, FlushRecords: 10_000, FlushAfter: time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Run(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !store.Ready() {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("the materializer stopped: %v", err)
		case <-tick.C:
		}
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		return err
	}
	if err := store.Flush(); err != nil {
		return err
	}
	fmt.Printf("filled %s with %d results in %s (%.0f/s); %d MB on disk\n", dir, src.made.Load(), took.Round(time.Millisecond),
		float64(src.made.Load())/took.Seconds(), store.DiskBytes()>>20)
	return nil
}

// generated is a lookup.Source that describes the real topics and makes up
// the results topic's records.
type generated struct {
	real    kafkaio.Settings
	results string
	codec   *schemas.Codec
	highs   []int64
	made    atomic.Int64
}

func (g *generated) Describe(ctx context.Context, topic string) (lookup.TopicState, error) {
	st, err := kafkaio.DescribeTopic(ctx, g.real, topic)
	if topic == g.results {
		g.highs = st.High
	}
	return lookup.TopicState(st), err
}

func (g *generated) Read(ctx context.Context, from map[string][]int64, h lookup.Handler) error {
	base, now := 0, time.Now().UnixMilli()
	for p, high := range g.highs {
		start := from[g.results][p]
		if start < 0 {
			start = 0
		}
		for off := start; off < high; off++ {
			i := base + int(off)
			v, err := g.codec.Encode(g.results, result(i, now-10_000_000+int64(i)))
			if err != nil {
				return err
			}
			if err := h.Record(&lookup.Record{Topic: g.results, Partition: int32(p), Offset: off, Key: []byte(idOf(i)), Value: v}); err != nil {
				return err
			}
			g.made.Add(1)
		}
		base += int(high)
		if err := h.EOF(g.results, int32(p)); err != nil {
			return err
		}
	}
	if err := h.Idle(); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// rss returns the process's resident set size, from /proc.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Join(strings.Fields(line), " ")
		}
	}
	return "unknown"
}

// goMemory describes the Go runtime's share of the RSS.
func goMemory() string {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return fmt.Sprintf("go heap in use %d MB, go sys %d MB", m.HeapInuse>>20, m.Sys>>20)
}
