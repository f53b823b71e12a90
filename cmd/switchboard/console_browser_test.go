package main

// The console in a real browser: Debian's chromium, headless, driven over
// the DevTools protocol with chromedp. CI installs chromium (.ci/run); the
// test fails without it, so a CI machine that lacks it cannot pass quietly.
// A developer without chromium may opt out with SWITCHBOARD_SKIP_BROWSER=1.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserPath finds chromium, or fails the test.
func browserPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("SWITCHBOARD_SKIP_BROWSER") == "1" {
		t.Skip("SWITCHBOARD_SKIP_BROWSER=1")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium in PATH: apt-get install chromium (or set SWITCHBOARD_SKIP_BROWSER=1 to skip this test)")
	return ""
}

func TestConsoleInHeadlessChromium(t *testing.T) {
	chromium := browserPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var banner, devErr syncBuffer
	done := make(chan int, 1)
	devCtx, stopDev := context.WithCancel(ctx)
	go func() {
		done <- run(devCtx, []string{"dev", "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &banner, &devErr)
	}()
	defer func() {
		stopDev()
		<-done
	}()
	eventually(t, "the dev banner", func() bool { return strings.Contains(banner.String(), "Stop with Ctrl-C") })
	httpAddr := regexp.MustCompile(`HTTP API\s+http://(\S+)`).FindStringSubmatch(banner.String())
	if httpAddr == nil {
		t.Fatalf("banner lacks the HTTP address:\n%s", banner.String())
	}
	url := "http://" + httpAddr[1] + "/"

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	var logs syncBuffer
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(func(f string, a ...any) {
		_, _ = fmt.Fprintf(&logs, strings.TrimSpace(f)+"\n", a...)
	}))
	defer bcancel()
	// The first action starts the browser; it must run on a context without
	// a deadline, which would stop the browser with it.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v\n%s", err, logs.String())
	}
	within := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		sctx, scancel := context.WithTimeout(bctx, 30*time.Second)
		defer scancel()
		if err := f(sctx); err != nil {
			t.Fatalf("%s: %v\nbrowser log:\n%s\ndev stderr:\n%s", what, err, logs.String(), devErr.String())
		}
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	within("load the console and go live", func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(`#status[data-state="live"]`)))
	})

	var sentID string
	within("send an intent from the form", func(ctx context.Context) error {
		if err := chromedp.Do(ctx,
			chromedp.SetValue(css("#intent-type"), "echo"),
			chromedp.SetValue(css("#payload"), `{"from":"the browser"}`),
			chromedp.Click(css("#send")),
			chromedp.WaitVisible(css("#sent[data-intent-id]")),
		); err != nil {
			return err
		}
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(css("#sent"), "data-intent-id"))
		sentID = a.Value
		return err
	})
	if sentID == "" {
		t.Fatal("the console shows no intent id after sending")
	}

	row := `#results tr[data-intent-id="` + sentID + `"]`
	var outcome, answered string
	within("see its result stream in", func(ctx context.Context) error {
		if err := chromedp.Do(ctx, chromedp.WaitVisible(css(row))); err != nil {
			return err
		}
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(css(row), "data-outcome"))
		if err != nil {
			return err
		}
		outcome = a.Value
		answered, err = chromedp.Run(ctx, chromedp.Text(css(`#counters li[data-outcome="answered"] .count`)))
		return err
	})
	if outcome != "answered" || answered == "" || answered == "0" {
		t.Fatalf("result row outcome %q, answered counter %q", outcome, answered)
	}

	var events []string
	within("search it and see its timeline", func(ctx context.Context) error {
		if err := chromedp.Do(ctx,
			chromedp.SetValue(css("#search-input"), sentID),
			chromedp.Click(css("#search")),
			chromedp.WaitVisible(css(`#timeline li[data-event="resolved"]`)),
		); err != nil {
			return err
		}
		var err error
		events, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timeline li")].map(li => li.dataset.event)`))
		return err
	})
	if got := strings.Join(events, ","); got != "received,dispatched,answered,resolved" {
		t.Fatalf("timeline = %s, want received,dispatched,answered,resolved", got)
	}

	// The writer streams its answer: the running card shows progress
	// before the result, and the partial text grows into the answer.
	var midway, final string
	within("follow a streaming intent", func(ctx context.Context) error {
		err := chromedp.Do(ctx,
			chromedp.SetValue(css("#intent-type"), "write"),
			chromedp.SetValue(css("#payload"), `{"text":"tokens arrive one by one","words":10,"delay_ms":120}`),
			chromedp.Click(css("#send")),
			chromedp.WaitVisible(css(`.running[data-state="running"][data-sequence]`)),
		)
		if err != nil {
			return err
		}
		id, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`.running[data-state="running"][data-sequence]`), "data-intent-id"))
		if err != nil {
			return err
		}
		card := `.running[data-intent-id="` + id.Value + `"]`
		if midway, err = chromedp.Run(ctx, chromedp.Text(css(card+` .partial`))); err != nil {
			return err
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(css(card+`[data-state="done"][data-outcome="answered"]`))); err != nil {
			return err
		}
		final, err = chromedp.Run(ctx, chromedp.Text(css(card+` .partial`)))
		return err
	})
	want := "tokens arrive one by one tokens arrive one by one"
	if final != want || midway == "" || !strings.HasPrefix(want, midway) || midway == want {
		t.Fatalf("streamed text: midway %q, final %q; want a prefix growing into %q", midway, final, want)
	}
}
