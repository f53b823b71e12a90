package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The Go agent serves two tenants' intents of one id as two intents: it
// echoes each request's tenant in its response ("" for none), and a cancel
// notice stops the handler of the tenant it names only.
func TestAgentEchoesTheTenantAndCancelsByTenant(t *testing.T) {
	b := newAgentBench(t)
	release := make(chan struct{})
	b.run(func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		select {
		case <-release:
			return schemas.JSON(`"` + intents.TenantOf(req.Tenant) + `"`), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	send := func(tenant *string) {
		v, err := b.codec.Encode(b.requests, &schemas.AgentRequest{IntentID: "x-1", IntentType: "t", Agent: "demo", Payload: "{}", Deadline: 1, Attempt: 1, Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.p.Send(b.ctx, b.requests, []byte("x-1"), v, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	// One slot: acme's x-1 is served, globex's waits for the slot (and the
	// agent reads on); the notice names acme.
	send(schemas.Ptr("acme"))
	send(schemas.Ptr("globex"))
	v, err := intents.MarshalCancel(intents.Cancel{IntentID: "x-1", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	h := []port.Header{{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)}}
	if err := b.p.Send(b.ctx, b.requests, []byte("x-1"), v, h, time.Time{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-b.cancelled:
		if got != "x-1" {
			t.Fatalf("cancelled %s", got)
		}
	case <-b.ctx.Done():
		t.Fatal("acme's x-1 was never cancelled")
	}
	send(nil)
	close(release)
	var tenants []*string
	found := errors.New("found")
	err = kafkaio.Read(b.ctx, b.s, kafkaio.Reading{Topics: []string{b.responses}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		var resp schemas.AgentResponse
		if err := b.codec.Decode(rec.Value, &resp); err != nil {
			return err
		}
		tenants = append(tenants, resp.Tenant)
		if resp.Tenant == nil || string(*resp.Answer) != `"`+*resp.Tenant+`"` {
			t.Errorf("response %+v does not echo its request's tenant", resp)
		}
		if len(tenants) == 2 {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatal(err)
	}
	if *tenants[0] != "globex" || *tenants[1] != "" {
		t.Fatalf("responses for tenants %q, %q; want globex's and the tenant-less one (acme's was cancelled)", *tenants[0], *tenants[1])
	}
}

// routerBench is a router, an agent and a publisher on the embedded broker:
// what the API drives.
type routerBench struct {
	t       *testing.T
	ctx     context.Context
	cfg     *config.Config
	codec   *schemas.Codec
	s       kafkaio.Settings
	pub     *client.Publisher
	started chan string // tenant/id of each intent the agent's handler starts
	release chan struct{}
	mu      sync.Mutex
	results []*schemas.IntentResult
	wake    chan struct{}
}

func newRouterBench(t *testing.T) *routerBench {
	t.Helper()
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	cfg, err := config.Parse("t.yaml", []byte(`
topics: {partitions: 1}
agents: {echo: {}}
intents: {echo: {agent: echo, timeout: 1m}}
router: {delivery: at_least_once}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &routerBench{t: t, ctx: ctx, cfg: cfg, s: kafkaio.Settings{Bootstrap: c.Bootstrap()}, started: make(chan string, 16), release: make(chan struct{}), wake: make(chan struct{})}
	if b.codec, err = schemas.NewCodec(); err != nil {
		t.Fatal(err)
	}
	if _, err := kafkaio.EnsureTopics(ctx, b.s, cfg.TopicPlans(), true); err != nil {
		t.Fatal(err)
	}
	if b.pub, err = client.NewPublisher(b.s, b.codec, cfg.Topics.Requests); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.pub.Close)

	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(func() { stop(); wg.Wait() })
	parts, err := kafkaio.RouterParts(ctx, b.s, cfg, b.codec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(cfg, b.codec, parts.Source, parts.Sink, router.WithRestorer(parts.Restorer), router.WithFallbackFeed(parts.Feed),
		router.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	a, err := client.NewAgent(client.AgentConfig{Name: "echo", Kafka: b.s, Codec: b.codec, Logger: slog.New(slog.DiscardHandler)},
		func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
			b.started <- intents.Scoped(intents.TenantOf(req.Tenant), req.IntentID)
			select {
			case <-b.release:
				return `{"ok":true}`, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	for _, run := range []func(context.Context) error{
		r.Run, a.Run,
		func(ctx context.Context) error {
			return kafkaio.Read(ctx, b.s, kafkaio.Reading{Topics: []string{cfg.Topics.Results}, From: kafkaio.FromBeginning(), OnStart: func(kafkaio.Offsets) { close(ready) }}, func(rec *port.Record) error {
				var res schemas.IntentResult
				if err := b.codec.Decode(rec.Value, &res); err != nil {
					return err
				}
				b.mu.Lock()
				b.results = append(b.results, &res)
				close(b.wake)
				b.wake = make(chan struct{})
				b.mu.Unlock()
				return nil
			})
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(rctx); err != nil && rctx.Err() == nil {
				t.Errorf("%v", err)
			}
		}()
	}
	<-ready
	return b
}

func (b *routerBench) submit(tenant, id string) {
	b.t.Helper()
	req := &schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: "{}", Tenant: &tenant}
	if err := b.pub.Publish(b.ctx, req); err != nil {
		b.t.Fatal(err)
	}
}

// result waits for the result of (tenant, id).
func (b *routerBench) result(tenant, id string) *schemas.IntentResult {
	b.t.Helper()
	for {
		b.mu.Lock()
		wake := b.wake
		for _, res := range b.results {
			if res.IntentID == id && intents.TenantOf(res.Tenant) == tenant {
				b.mu.Unlock()
				return res
			}
		}
		b.mu.Unlock()
		select {
		case <-wake:
		case <-b.ctx.Done():
			b.t.Fatalf("no result for %s of %s", id, tenant)
		}
	}
}

func (b *routerBench) startedNext() string {
	b.t.Helper()
	select {
	case s := <-b.started:
		return s
	case <-b.ctx.Done():
		b.t.Fatal("no intent reached the agent")
	}
	return ""
}

// Finding 1 of issue 13: the API builds a cancel with the caller's tenant,
// and Publisher.PublishCancel must write it. Through the client and a real
// router: globex's cancel of acme's pending intent leaves it pending, and it
// is answered; acme's own cancel of another of its intents cancels it.
func TestPublishCancelCarriesTheTenant(t *testing.T) {
	b := newRouterBench(t)
	b.submit("acme", "c-1")
	if got := b.startedNext(); got != intents.Scoped("acme", "c-1") {
		t.Fatalf("the agent started %q", got)
	}
	if err := b.pub.PublishCancel(b.ctx, intents.Cancel{IntentID: "c-1", Reason: "globex says stop", Tenant: "globex"}); err != nil {
		t.Fatal(err)
	}
	b.submit("acme", "c-2") // after the cancel on the one requests partition
	if got := b.startedNext(); got != intents.Scoped("acme", "c-2") {
		t.Fatalf("the agent started %q", got)
	}
	if err := b.pub.PublishCancel(b.ctx, intents.Cancel{IntentID: "c-2", Reason: "mine", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if res := b.result("acme", "c-2"); res.Outcome != schemas.OutcomeCancelled || res.Error == nil || res.Error.Message != "mine" {
		t.Fatalf("acme's cancel of its own intent: %+v", res)
	}
	close(b.release)
	if res := b.result("acme", "c-1"); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("acme's intent after globex's cancel: %+v (error %+v)", res, res.Error)
	}
}

// Await returns the result of the intent of its tenant and id, never the
// result of another tenant's intent of the same id (switchboard send
// --tenant --wait).
func TestAwaitMatchesTheTenant(t *testing.T) {
	b := newRouterBench(t)
	close(b.release) // the agent answers at once
	res, err := client.Await(b.ctx, b.s, b.codec, b.cfg.Topics.Results, "globex", "a-1", func() error {
		b.submit("acme", "a-1")
		b.result("acme", "a-1") // acme's result is on the topic first
		b.submit("globex", "a-1")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tenant == nil || *res.Tenant != "globex" || res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("Await returned %+v", res)
	}
}
