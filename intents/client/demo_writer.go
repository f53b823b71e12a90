package client

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// WriterText is what the writer demo agent writes when the payload gives no
// text.
const WriterText = "Switchboard routes each intent to its agent over Kafka, " +
	"waits for the answer within the deadline, falls back when the agent is late, " +
	"and streams the agent's progress to every client as it writes."

// Writer demo limits: a payload cannot keep the agent busy for ever.
const (
	writerMaxWords   = 4096
	writerMaxDelayMs = 10_000
	// WriterDelay is the pause before each word when the payload says none.
	WriterDelay = 80 * time.Millisecond
)

// WriterHandler is a demo agent that writes its answer word by word, as an
// LLM writes tokens: before each word it waits delay_ms, then sends the word
// as a progress update (Progress: message "writing", progress i of total n,
// partial {"text":"<word> "}), and finally answers {"agent": name, "text":
// the whole text, "words": n}. The payload (a JSON object; anything else
// means the defaults) may set:
//
//	{"text": "...",      what to write (default WriterText)
//	 "words": 200,       write this many words, cycling through the text
//	 "delay_ms": 20}     pause before each word (default 80; 0: none)
//
// A client that concatenates the partials' "text" in sequence order has the
// answer's text. words is capped at 4096 and delay_ms at 10000. A nil clock
// is the real one.
func WriterHandler(name string, clock clockwork.Clock) Handler {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		words, delay := writerPlan(req.Payload)
		var text strings.Builder
		total := float64(len(words))
		for i, w := range words {
			if delay > 0 {
				select {
				case <-clock.After(delay):
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			chunk := w
			if i < len(words)-1 {
				chunk += " "
			}
			text.WriteString(chunk)
			partial, err := json.Marshal(struct {
				Text string `json:"text"`
			}{chunk})
			if err != nil {
				return "", err
			}
			done := float64(i + 1)
			if err := Progress(ctx, Update{Message: "writing", Progress: &done, Total: &total, Partial: schemas.JSON(partial)}); err != nil {
				return "", err
			}
		}
		answer, err := json.Marshal(struct {
			Agent string `json:"agent"`
			Text  string `json:"text"`
			Words int    `json:"words"`
		}{name, text.String(), len(words)})
		return schemas.JSON(answer), err
	}
}

// writerPlan reads the writer's payload: the words to write and the pause
// before each.
func writerPlan(payload schemas.JSON) ([]string, time.Duration) {
	var p struct {
		Text    string `json:"text"`
		Words   int    `json:"words"`
		DelayMs *int64 `json:"delay_ms"`
	}
	_ = json.Unmarshal([]byte(payload), &p) // unreadable: the defaults
	source := strings.Fields(p.Text)
	if len(source) == 0 {
		source = strings.Fields(WriterText)
	}
	n := len(source)
	if p.Words > 0 {
		n = min(p.Words, writerMaxWords)
	}
	n = min(n, writerMaxWords)
	words := make([]string, n)
	for i := range words {
		words[i] = source[i%len(source)]
	}
	delay := WriterDelay
	if p.DelayMs != nil {
		delay = time.Duration(min(max(*p.DelayMs, 0), writerMaxDelayMs)) * time.Millisecond
	}
	return words, delay
}
