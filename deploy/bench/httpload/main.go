// Command httpload offers an open-loop load to Switchboard's HTTP API and
// says how each intent ended as its caller saw it: POST /v1/intents?wait=W
// at a fixed rate (each request on its own goroutine, sent on schedule
// whatever the earlier ones are doing), then one JSON line of counts. It
// measures admission (issue 16, item 4): refused (503 overloaded) against
// answered within the deadline, answered late, fallbacks, shed and no
// result within the wait.
//
//	go run ./deploy/bench/httpload --url http://127.0.0.1:8080 --rate 2000 --duration 20s --timeout 2s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type counts struct {
	Rate             float64 `json:"rate"`
	Sent             int64   `json:"sent"`
	AnsweredInTime   int64   `json:"answered_in_deadline"`
	AnsweredPerSec   float64 `json:"answered_in_deadline_per_s"`
	AnsweredLate     int64   `json:"answered_late"`
	Fallback         int64   `json:"fallback"` // fallback_cache, fallback_static, timed_out
	Shed             int64   `json:"shed"`
	OtherOutcome     int64   `json:"other_outcome"`
	Refused          int64   `json:"refused"` // 503 overloaded
	Unavailable      int64   `json:"unavailable"`
	Pending          int64   `json:"no_result_in_wait"`
	ClientErrors     int64   `json:"client_errors"`   // no HTTP answer (connection refused or reset), or an unexpected status
	ClientTimeouts   int64   `json:"client_timeouts"` // no HTTP answer within the wait plus 10 s
	RefusedMaxMillis int64   `json:"refused_slowest_ms"`
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the API's base `URL`")
	rate := flag.Float64("rate", 1000, "intents per second")
	duration := flag.Duration("duration", 20*time.Second, "how long to send")
	timeout := flag.Duration("timeout", 2*time.Second, "the intent type's timeout: an answer later than this is late")
	grace := flag.Duration("grace", time.Second, "?wait is the timeout plus this")
	intentType := flag.String("intent-type", "echo", "the intent `type`")
	flag.Parse()

	tr := &http.Transport{MaxIdleConns: 20000, MaxIdleConnsPerHost: 20000, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr, Timeout: *timeout + *grace + 10*time.Second}
	target := strings.TrimRight(*url, "/") + "/v1/intents?wait=" + (*timeout + *grace).String()
	body := fmt.Sprintf(`{"intent_type":%q,"payload":{"n":1}}`, *intentType)
	var (
		c  counts
		wg sync.WaitGroup
	)
	c.Rate = *rate
	start := time.Now()
	n := int64(*rate * duration.Seconds())
	for i := range n {
		if d := time.Until(start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(client, target, body, *timeout, &c)
		}()
	}
	wg.Wait()
	c.Sent = n
	c.AnsweredPerSec = float64(c.AnsweredInTime) / duration.Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(c)
}

func one(client *http.Client, target, body string, timeout time.Duration, c *counts) {
	t0 := time.Now()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
			atomic.AddInt64(&c.ClientTimeouts, 1)
		} else {
			atomic.AddInt64(&c.ClientErrors, 1)
		}
		return
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(t0)
	var r struct {
		Outcome string `json:"outcome"`
		Status  string `json:"status"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &r)
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && r.Error.Code == "overloaded":
		atomic.AddInt64(&c.Refused, 1)
		for {
			old := atomic.LoadInt64(&c.RefusedMaxMillis)
			if took.Milliseconds() <= old || atomic.CompareAndSwapInt64(&c.RefusedMaxMillis, old, took.Milliseconds()) {
				break
			}
		}
	case resp.StatusCode == http.StatusServiceUnavailable:
		atomic.AddInt64(&c.Unavailable, 1)
	case resp.StatusCode == http.StatusAccepted:
		atomic.AddInt64(&c.Pending, 1)
	case resp.StatusCode != http.StatusOK:
		atomic.AddInt64(&c.ClientErrors, 1)
	case r.Outcome == "answered" && took <= timeout:
		atomic.AddInt64(&c.AnsweredInTime, 1)
	case r.Outcome == "answered":
		atomic.AddInt64(&c.AnsweredLate, 1)
	case r.Outcome == "shed":
		atomic.AddInt64(&c.Shed, 1)
	case r.Outcome == "fallback_cache" || r.Outcome == "fallback_static" || r.Outcome == "timed_out":
		atomic.AddInt64(&c.Fallback, 1)
	default:
		atomic.AddInt64(&c.OtherOutcome, 1)
	}
}
