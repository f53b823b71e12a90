package kafkaio

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

func TestBoundedReturnsTheCallsOwnResult(t *testing.T) {
	want := errors.New("refused")
	if err := bounded(context.Background(), time.Hour, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("bounded = %v, want the call's error", err)
	}
	// A call that returns after its deadline but within the grace is not
	// stuck: its own error (librdkafka's timeout) is what counts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := bounded(ctx, time.Hour, func() error { <-ctx.Done(); return want })
	if !errors.Is(err, want) {
		t.Fatalf("bounded after the deadline = %v, want the call's error", err)
	}
}

// librdkafka#5511: send_offsets_to_transaction can wait for good after a
// broker restart. The call is given up past its deadline, the lane is
// marked stuck (Reset and Close leave it alone) and the router gets a fatal
// TxnError, which makes it replace the producers.
func TestATransactionalCallThatNeverReturnsAbandonsItsLane(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	k := &TxSink{txID: "g.i", grace: time.Nanosecond, lanes: [2]*txLane{{}, {}}, cur: 1}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := k.call(ctx, "send_offsets_to_transaction", func(*kafka.Producer) error {
		<-release
		return nil
	})
	if !errors.Is(err, ErrTransactionStuck) {
		t.Fatalf("call = %v, want ErrTransactionStuck", err)
	}
	var te *port.TxnError
	if !errors.As(err, &te) || !te.Fatal {
		t.Fatalf("call = %#v, want a fatal TxnError (the producer must be replaced)", err)
	}
	if !k.lanes[1].stuck || k.lanes[0].stuck {
		t.Fatalf("stuck lanes = %v, %v; want only the current one", k.lanes[0].stuck, k.lanes[1].stuck)
	}
}
