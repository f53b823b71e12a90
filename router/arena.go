package router

// The outputs of the hot path (an intent's dispatch, changelog records and
// result) take their Output and the bytes of their value from chunks shared
// by many outputs, rather than two allocations each.
//
// Nothing in a chunk is used twice: an Output or a value, once handed to
// emit, belongs to the sink, and the chunk lives for as long as any of its
// parts does. That is the cost: a chunk stays in memory until the sink has
// let go of all its outputs, which is at their delivery (a Kafka producer
// copies them when they are produced; at_least_once holds an Output until
// its acknowledgement). Values larger than a quarter of a chunk get their
// own allocation, so a chunk never keeps a large payload alive for
// others.

import (
	"github.com/switchboard-mcp/switchboard/schemas"

	"github.com/switchboard-mcp/switchboard/router/port"
)

const (
	valueChunk  = 16 << 10 // bytes of values per chunk
	outputChunk = 64       // Outputs per chunk
)

// arena hands out the outputs and values of the event loop's hot path. It
// is owned by the event loop.
type arena struct {
	values  []byte
	outputs []port.Output
}

// output returns a new Output holding o.
func (a *arena) output(o port.Output) *port.Output {
	if len(a.outputs) == 0 {
		a.outputs = make([]port.Output, outputChunk)
	}
	p := &a.outputs[0]
	a.outputs = a.outputs[1:]
	*p = o
	return p
}

// encode is codec.EncodeAs into a value chunk: the value's bytes, which a
// sink may keep but never append to (its capacity ends with it).
func (a *arena) encode(codec *schemas.Codec, enc schemas.Encoding, topic string, r schemas.Record) ([]byte, error) {
	return a.encodeWith(codec, false, enc, topic, r)
}

// encodeDecoded is encode for a record whose JSON documents a Codec decoded
// (an intent's payload, from its request or its restored pending state):
// they are not validated again (schemas.Codec.AppendEncodeDecoded).
func (a *arena) encodeDecoded(codec *schemas.Codec, enc schemas.Encoding, topic string, r schemas.Record) ([]byte, error) {
	return a.encodeWith(codec, true, enc, topic, r)
}

func (a *arena) encodeWith(codec *schemas.Codec, decoded bool, enc schemas.Encoding, topic string, r schemas.Record) ([]byte, error) {
	hint := schemas.SizeHint(r)
	if hint > valueChunk/4 {
		return codec.EncodeAs(enc, topic, r)
	}
	if cap(a.values)-len(a.values) < hint {
		a.values = make([]byte, 0, valueChunk)
	}
	start := len(a.values)
	var b []byte
	var err error
	if decoded {
		b, err = codec.AppendEncodeDecoded(a.values, enc, topic, r)
	} else {
		b, err = codec.AppendEncodeAs(a.values, enc, topic, r)
	}
	if err != nil {
		return nil, err
	}
	a.values = b // grown past the chunk if the hint fell short: a new, larger chunk
	return b[start:len(b):len(b)], nil
}
