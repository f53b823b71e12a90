package kafkaio

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestPropertiesGoToTheClientsThatReadThem(t *testing.T) {
	s := Settings{Bootstrap: "b:1", Properties: map[string]string{"linger.ms": "0", "session.timeout.ms": "6000", "security.protocol": "SASL_SSL"}}
	c, err := s.configMapFor("consumer", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.configMapFor("producer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*c)["linger.ms"]; ok {
		t.Error("a consumer got linger.ms")
	}
	if _, ok := (*p)["session.timeout.ms"]; ok {
		t.Error("a producer got session.timeout.ms")
	}
	for _, m := range []kafka.ConfigMap{*c, *p} {
		if m["security.protocol"] != "SASL_SSL" {
			t.Errorf("a shared property was dropped: %v", m)
		}
	}
	if (*c)["session.timeout.ms"] != "6000" || (*p)["linger.ms"] != "0" {
		t.Error("a property was dropped from the client that reads it")
	}
}

// Admin clients are producers to librdkafka: consumer properties would log a
// CONFWARN line each ('topics create', 'serve' checking its topics).
func TestAdminClientsGetNoConsumerProperties(t *testing.T) {
	s := Settings{Bootstrap: "b:1", Properties: map[string]string{"heartbeat.interval.ms": "2000", "security.protocol": "SASL_SSL"}}
	a, err := s.adminConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*a)["heartbeat.interval.ms"]; ok {
		t.Error("an admin client got heartbeat.interval.ms")
	}
	if (*a)["security.protocol"] != "SASL_SSL" {
		t.Errorf("an admin client lost a shared property: %v", *a)
	}
}

// The router's clients bound what librdkafka buffers (prefetched records,
// unacknowledged outputs), unless kafka.properties sets the same keys.
func TestRouterClientsBoundTheirBuffers(t *testing.T) {
	c := sourceConfig(Settings{Bootstrap: "b:1"}, "g", SourceOptions{})
	if c["queued.max.messages.kbytes"] != 16<<10 || c["fetch.max.bytes"] != 16<<20 {
		t.Fatalf("consumer buffers: %v", c)
	}
	// router.memory_limit_bytes scales them (config.Memory), for the
	// router's consumer and for the reader that feeds the API.
	c = sourceConfig(Settings{Bootstrap: "b:1"}, "g", SourceOptions{PrefetchBytes: 9 << 20})
	if c["queued.max.messages.kbytes"] != 9<<10 || c["fetch.max.bytes"] != 9<<20 {
		t.Fatalf("consumer buffers at 9 MiB: %v", c)
	}
	r := Reading{From: FromOffsetsOrEarliest(nil), PrefetchBytes: 9 << 20}.readerSettings(Settings{})
	if r["queued.max.messages.kbytes"] != 9<<10 || r["fetch.max.bytes"] != 9<<20 || r["auto.offset.reset"] != "earliest" {
		t.Fatalf("reader buffers at 9 MiB: %v", r)
	}
	big := Settings{Bootstrap: "127.0.0.1:1", Properties: map[string]string{"message.max.bytes": "20000000"}}
	if r := (Reading{PrefetchBytes: 9 << 20}).readerSettings(big); r["fetch.max.bytes"] != 20000000 {
		t.Fatalf("a reader's fetch.max.bytes below message.max.bytes: %v", r)
	}
	c2, err := newReader(big, "t", false, (Reading{PrefetchBytes: 4 << 20}).readerSettings(big))
	if err != nil {
		t.Fatalf("librdkafka refuses the reader's settings: %v", err)
	}
	_ = c2.Close()
	if r := (Reading{}).readerSettings(Settings{}); len(r) != 0 {
		t.Fatalf("a reader without a bound got settings: %v", r)
	}
	if r := (Reading{PrefetchBytes: 9 << 20}).readerSettings(Settings{Properties: map[string]string{"fetch.max.bytes": "1000000"}}); r["fetch.max.bytes"] != nil {
		t.Fatalf("a reader overrode kafka.properties' fetch.max.bytes: %v", r)
	}
	mine := Settings{Bootstrap: "b:1", Properties: map[string]string{"queued.max.messages.kbytes": "1024", "queue.buffering.max.kbytes": "2048"}}
	if _, set := sourceConfig(mine, "g", SourceOptions{})["queued.max.messages.kbytes"]; set {
		t.Fatal("the router overrode kafka.properties' queued.max.messages.kbytes")
	}
	if routerProducerSettings(Settings{})["queue.buffering.max.kbytes"] != 128<<10 {
		t.Fatal("the router's producer queue is not bounded")
	}
	if _, set := routerProducerSettings(mine)["queue.buffering.max.kbytes"]; set {
		t.Fatal("the router overrode kafka.properties' queue.buffering.max.kbytes")
	}
	// And librdkafka takes them.
	cm, err := mine.configMapFor("consumer", sourceConfig(Settings{Bootstrap: "b:1"}, "g", SourceOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := kafka.NewConsumer(cm)
	if err != nil {
		t.Fatalf("librdkafka refuses the consumer's buffers: %v", err)
	}
	_ = consumer.Close()
}

// Every Switchboard producer sends at once (linger.ms 0) unless
// kafka.properties sets a linger, under either of its names.
func TestProducersLingerZeroUnlessSet(t *testing.T) {
	for _, m := range []kafka.ConfigMap{producerSettings(Settings{}), routerProducerSettings(Settings{})} {
		if m["linger.ms"] != 0 {
			t.Errorf("default producer settings: linger.ms %v, want 0", m["linger.ms"])
		}
	}
	for _, key := range []string{"linger.ms", "queue.buffering.max.ms"} {
		s := Settings{Bootstrap: "b:1", Properties: map[string]string{key: "7"}}
		if _, set := routerProducerSettings(s)["linger.ms"]; set {
			t.Errorf("kafka.properties sets %s: the router still insists on linger.ms", key)
		}
		cm, err := s.configMapFor("producer", producerSettings(s))
		if err != nil {
			t.Fatal(err)
		}
		if (*cm)[key] != "7" {
			t.Errorf("kafka.properties' %s was not passed on: %v", key, *cm)
		}
	}
}

// An agent's answers go out without idempotence and one request in flight
// per broker (NewAnswerProducer says why), whatever kafka.properties says,
// and librdkafka accepts the combination.
func TestAnswerProducerIsNotIdempotentAndKeepsOrder(t *testing.T) {
	s := Settings{Bootstrap: "127.0.0.1:1", Properties: map[string]string{"enable.idempotence": "true", "max.in.flight.requests.per.connection": "5"}}
	cm, err := s.configMapFor("producer", answerProducerSettings(s))
	if err != nil {
		t.Fatal(err)
	}
	if (*cm)["enable.idempotence"] != false || (*cm)["max.in.flight.requests.per.connection"] != 1 || (*cm)["acks"] != "all" {
		t.Errorf("answer producer: enable.idempotence %v, max.in.flight %v, acks %v; want false, 1, all",
			(*cm)["enable.idempotence"], (*cm)["max.in.flight.requests.per.connection"], (*cm)["acks"])
	}
	if producerSettings(s)["enable.idempotence"] != true {
		t.Error("the other producers lost their idempotence")
	}
	p, err := NewAnswerProducer(s)
	if err != nil {
		t.Fatalf("librdkafka refuses the answer producer's settings: %v", err)
	}
	p.Close(time.Second)
}

// Every client re-bootstraps after 10 s without metadata (librdkafka#5301:
// a broker in controlled shutdown can leave a client with no broker until
// the trigger fires, 5 minutes by default), unless kafka.properties sets the
// trigger: the router's consumer and producers, the API's readers and
// producer, the admin clients, the agent runner's. librdkafka accepts the
// setting on each kind of client.
func TestEveryClientRebootstrapsAfterTenSeconds(t *testing.T) {
	s := Settings{Bootstrap: "127.0.0.1:1"}
	owned := map[string]kafka.ConfigMap{
		"group reader": groupReaderSettings("g"), "answer producer": answerProducerSettings(s),
		"producer": producerSettings(s), "router producer": routerProducerSettings(s),
		"exactly_once producer": atOnceProducerSettings(s), "source": sourceConfig(s, "g", SourceOptions{}),
		"transactional source": sourceConfig(s, "g", SourceOptions{Transactional: true}),
	}
	kinds := map[string]func(Settings) (*kafka.ConfigMap, error){
		"admin":    Settings.adminConfigMap,
		"producer": func(s Settings) (*kafka.ConfigMap, error) { return s.configMapFor("producer", nil) },
		"consumer": func(s Settings) (*kafka.ConfigMap, error) { return s.configMapFor("consumer", nil) },
	}
	for name, m := range owned {
		if _, set := m[rebootstrapTrigger]; set {
			t.Errorf("%s's own settings set %s: kafka.properties could not override it", name, rebootstrapTrigger)
		}
	}
	for name, cm := range kinds {
		m, err := cm(s)
		if err != nil {
			t.Fatal(err)
		}
		if (*m)[rebootstrapTrigger] != 10000 {
			t.Errorf("%s: %s = %v, want 10000", name, rebootstrapTrigger, (*m)[rebootstrapTrigger])
		}
		m, err = cm(Settings{Bootstrap: s.Bootstrap, Properties: map[string]string{rebootstrapTrigger: "60000"}})
		if err != nil {
			t.Fatal(err)
		}
		if (*m)[rebootstrapTrigger] != "60000" {
			t.Errorf("%s: kafka.properties' %s was overridden: %v", name, rebootstrapTrigger, (*m)[rebootstrapTrigger])
		}
	}
	r, err := NewGroupReader(s, "g", []string{"t"}, GroupReaderOptions{})
	if err != nil {
		t.Fatalf("librdkafka refuses the group reader's settings: %v", err)
	}
	if err := r.c.Close(); err != nil {
		t.Log(err)
	}
	p, err := NewProducer(s)
	if err != nil {
		t.Fatalf("librdkafka refuses the producer's settings: %v", err)
	}
	p.Close(time.Second)
	a, err := newAdmin(s)
	if err != nil {
		t.Fatalf("librdkafka refuses the admin client's settings: %v", err)
	}
	a.Close()
}

// Every librdkafka client of the package is made by newProducer,
// newConsumer or newAdmin (or from one of their clients), whose settings
// come from configMapFor: a client made elsewhere would miss its defaults,
// the re-bootstrap after 10 s among them.
func TestEveryClientIsMadeFromConfigMapFor(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	makers := map[string]bool{"newProducer": true, "newConsumer": true, "newAdmin": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "kafka" && strings.HasPrefix(sel.Sel.Name, "New") &&
					(strings.HasSuffix(sel.Sel.Name, "Producer") || strings.HasSuffix(sel.Sel.Name, "Consumer") || sel.Sel.Name == "NewAdminClient") {
					from := strings.HasPrefix(sel.Sel.Name, "NewAdminClientFrom")
					if !makers[fn.Name.Name] && !from {
						t.Errorf("%s: %s calls kafka.%s: make the client with newProducer, newConsumer or newAdmin", fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
