//go:build integration

package kafkaio_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// testRestoreWaitsForOpenTransactions: Restore reads the changelog to the
// high watermark it saw when it began, so a transaction still open there
// (as a committed one is until its marker reaches the partition) is waited
// for: its records are restored when it commits and left out when it
// aborts. Reading only to the last stable offset returned at once without
// them, which lost the pending intents of a transaction whose offsets the
// new owner already started from (a chaos run lost 5 intents).
func testRestoreWaitsForOpenTransactions(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, bootstrap, "rs", 1)
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": topic + ".tx"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	// write puts one pending intent per id on partition 0 in a new
	// transaction and waits until the broker has them; the transaction
	// stays open.
	write := func(ids ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		delivered := make(chan kafka.Event, len(ids))
		for _, id := range ids {
			v, err := codec.Encode(topic, &schemas.PendingIntent{IntentID: id, IntentType: "t", Agent: "a", Payload: schemas.JSON(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: []byte(id), Value: v}, delivered); err != nil {
				t.Fatal(err)
			}
		}
		for range ids {
			select {
			case ev := <-delivered:
				if m, ok := ev.(*kafka.Message); !ok || m.TopicPartition.Error != nil {
					t.Fatalf("producing: %v", ev)
				}
			case <-ctx.Done():
				t.Fatal("the transaction's records were not delivered")
			}
		}
	}
	write("committed")
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	// restoreAcross starts Restore while a transaction holding ids is open,
	// waits until Restore says it waits for it, ends it with end, and
	// returns the ids restored.
	restoreAcross := func(end func(context.Context) error, ids ...string) []string {
		t.Helper()
		write(ids...)
		waited := make(chan [2]int64, 1)
		done := make(chan []string, 1)
		errs := make(chan error, 1)
		go func() {
			cl := &kafkaio.Changelog{
				Settings: kafkaio.Settings{Bootstrap: bootstrap}, Topic: topic, Codec: codec,
				OnWait: func(_ int32, stable, high int64) { waited <- [2]int64{stable, high} },
			}
			got, err := cl.Restore(ctx, []int32{0})
			if err != nil {
				errs <- err
				return
			}
			var restored []string
			for _, r := range got[0] {
				restored = append(restored, r.Key)
			}
			slices.Sort(restored)
			done <- restored
		}()
		select {
		case w := <-waited:
			if w[0] >= w[1] {
				t.Errorf("Restore waited at last stable offset %d, not below the high watermark %d", w[0], w[1])
			}
		case got := <-done:
			t.Fatalf("Restore returned %v while a transaction holding %v was open: it must wait for it to end", got, ids)
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("Restore neither returned nor waited")
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-done:
			return got
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("Restore did not return after the transaction ended")
		}
		return nil
	}

	if got, want := restoreAcross(p.CommitTransaction, "late"), []string{"committed", "late"}; !slices.Equal(got, want) {
		t.Errorf("after the open transaction committed, Restore gave %v, want %v", got, want)
	}
	if got, want := restoreAcross(p.AbortTransaction, "aborted"), []string{"committed", "late"}; !slices.Equal(got, want) {
		t.Errorf("after the open transaction aborted, Restore gave %v, want %v", got, want)
	}
}
