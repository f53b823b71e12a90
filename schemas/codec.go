package schemas

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
)

// DefaultMaxRecordBytes is the default limit on the size of a record, encoded
// or decoded: 1 MiB, Kafka's default message.max.bytes.
const DefaultMaxRecordBytes = 1 << 20

// maxAvroItems bounds the items of one Avro array the decoder allocates. Our
// schemas have no arrays; a newer writer's may, in fields we skip.
const maxAvroItems = 4096

// wireHeaderLen is the Confluent wire format prefix: magic byte 0 and a
// 4-byte big-endian schema id.
const wireHeaderLen = 5

// Codec encodes and decodes Switchboard records, as JSON or as Avro in the
// Confluent wire format, and reads both whatever it writes. It is safe for
// concurrent use. It caches schema ids and resolved writer schemas for its
// lifetime (ids are immutable in a registry) and holds no goroutines, so it
// needs no closing.
type Codec struct {
	reg      *Registry
	enc      Encoding // never EncodingDefault
	maxBytes int
	api      avro.API
	schemas  [numKinds]*recordSchema

	subjectIDs   sync.Map // subjectKey -> uint32: ids of our schemas per topic
	writerByID   sync.Map // uint32 -> writerSchema: writer schemas fetched by id
	readerByID   sync.Map // resolvedKey -> resolvedSchema
	registerOnce flight[subjectKey, uint32]
	fetchOnce    flight[uint32, writerSchema]

	avroWriters sync.Pool // *avro.Writer
	avroReaders sync.Pool // *avro.Reader
	jsonBufs    sync.Pool // *bytes.Buffer
}

type subjectKey struct {
	topic string // not the subject: building it would allocate per Encode
	kind  kind
}

type resolvedKey struct {
	id   uint32
	kind kind
}

// writerSchema is a schema fetched by id, or why it cannot be used. Only
// lasting failures are cached: an id the registry does not know is asked
// again next time (it may be registered meanwhile).
type writerSchema struct {
	schema avro.Schema
	err    error
}

type resolvedSchema struct {
	schema avro.Schema
	scan   avro.Schema // if not nil, scanAvro bodies with it first (see avrocheck.go)
	err    error       // deterministic failure (incompatible), cached too
}

// CodecOption configures a Codec.
type CodecOption func(*codecConfig)

type codecConfig struct {
	reg      *Registry
	enc      Encoding
	maxBytes int
}

// WithRegistry gives the codec a Schema Registry: it then writes Avro in the
// Confluent wire format by default, registering each record type's schema
// under "<topic>-value" on first use, and can read Avro records. Without a
// registry the codec writes JSON, and reading an Avro record fails with
// ErrNoRegistry.
func WithRegistry(r *Registry) CodecOption {
	return func(c *codecConfig) { c.reg = r }
}

// WithDefaultEncoding overrides the encoding Encode uses (for example JSON
// although a registry is configured for reading Avro). EncodingAvro needs a
// registry.
func WithDefaultEncoding(e Encoding) CodecOption {
	return func(c *codecConfig) { c.enc = e }
}

// WithMaxRecordBytes sets the largest record the codec encodes or decodes, in
// bytes (default DefaultMaxRecordBytes). Larger records fail with
// ErrTooLarge before any decoding, and no string in a record may be larger.
func WithMaxRecordBytes(n int) CodecOption {
	return func(c *codecConfig) { c.maxBytes = n }
}

// NewCodec returns a codec. Without options it writes JSON and reads JSON only
// (Avro records fail with ErrNoRegistry); see WithRegistry. It does not
// contact the registry: see Prepare.
func NewCodec(opts ...CodecOption) (*Codec, error) {
	cfg := codecConfig{maxBytes: DefaultMaxRecordBytes}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxBytes <= wireHeaderLen {
		return nil, fmt.Errorf("schemas: max record bytes %d is too small", cfg.maxBytes)
	}
	switch cfg.enc {
	case EncodingDefault:
		cfg.enc = EncodingJSON
		if cfg.reg != nil {
			cfg.enc = EncodingAvro
		}
	case EncodingJSON:
	case EncodingAvro:
		if cfg.reg == nil {
			return nil, fmt.Errorf("%w: Avro encoding needs WithRegistry", ErrNoRegistry)
		}
	default:
		return nil, fmt.Errorf("schemas: unknown encoding %d", uint8(cfg.enc))
	}
	parsed, err := recordSchemas()
	if err != nil {
		return nil, err
	}
	c := &Codec{
		reg:      cfg.reg,
		enc:      cfg.enc,
		maxBytes: cfg.maxBytes,
		schemas:  parsed,
		api: avro.Config{
			TagKey:            "avro",
			MaxByteSliceSize:  cfg.maxBytes,
			MaxSliceAllocSize: maxAvroItems,
		}.Freeze(),
	}
	c.avroWriters.New = func() any { return avro.NewWriter(nil, 512, avro.WithWriterConfig(c.api)) }
	c.avroReaders.New = func() any { return avro.NewReader(nil, 0, avro.WithReaderConfig(c.api)) }
	c.jsonBufs.New = func() any { return new(bytes.Buffer) }
	return c, nil
}

// Encoding returns the encoding Encode writes: EncodingJSON or EncodingAvro.
func (c *Codec) Encoding() Encoding { return c.enc }

// Subject returns the Schema Registry subject of a topic's records:
// "<topic>-value" (Confluent's TopicNameStrategy).
func Subject(topic string) string { return topic + "-value" }

// Encode encodes r for topic in the codec's encoding. With Avro, the first
// record of each type for a topic registers its schema under the topic's
// subject (an HTTP request, see Prepare); later ones use the cached id.
// Errors wrap ErrInvalidRecord, ErrTooLarge, ErrNoRegistry or registry errors.
func (c *Codec) Encode(topic string, r Record) ([]byte, error) {
	return c.EncodeAs(c.enc, topic, r)
}

// EncodeAs is Encode in the given encoding, e.g. JSON for an agent that asked
// for JSON requests. EncodingDefault means the codec's encoding.
func (c *Codec) EncodeAs(enc Encoding, topic string, r Record) ([]byte, error) {
	if r == nil || isNil(r) {
		return nil, fmt.Errorf("%w: nil record", ErrInvalidRecord)
	}
	if err := checkEncode(r); err != nil {
		return nil, err
	}
	if enc == EncodingDefault {
		enc = c.enc
	}
	return c.appendChecked(nil, enc, topic, r)
}

// appendChecked appends r's encoding to dst (nil: a new slice of its
// size); r has passed checkEncode.
func (c *Codec) appendChecked(dst []byte, enc Encoding, topic string, r Record) ([]byte, error) {
	switch enc {
	case EncodingJSON:
		if dst == nil {
			return c.encodeJSON(r)
		}
		b, err := c.encodeJSON(r)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	case EncodingAvro:
		return c.appendAvro(dst, topic, r)
	}
	return dst, fmt.Errorf("schemas: unknown encoding %d", uint8(enc))
}

// AppendEncodeAs is EncodeAs appending to dst: it returns dst extended by
// r's encoding, or dst unchanged and an error. The encoding is
// dst[len(dst):] of the result; with room for SizeHint(r) in dst, the
// router's records (AgentRequest, PendingIntent, IntentResult in JSON)
// are written in place, without an allocation.
func (c *Codec) AppendEncodeAs(dst []byte, enc Encoding, topic string, r Record) ([]byte, error) {
	return c.appendEncode(dst, enc, topic, r, true)
}

// AppendEncodeDecoded is AppendEncodeAs for a record whose JSON documents
// (payload, answer, partial) are ones a Codec's Decode returned: Decode
// validated them, so they are not validated again (json.Valid costs about
// a microsecond per 100 bytes, and the router encodes each decoded payload
// twice, for the agent and for the pending changelog). Enum symbols are
// checked as AppendEncodeAs checks them. The caller vouches for the
// documents: one that is not well-formed makes a record no reader decodes.
func (c *Codec) AppendEncodeDecoded(dst []byte, enc Encoding, topic string, r Record) ([]byte, error) {
	return c.appendEncode(dst, enc, topic, r, false)
}

// appendEncode is AppendEncodeAs, validating r's JSON documents if docs.
func (c *Codec) appendEncode(dst []byte, enc Encoding, topic string, r Record, docs bool) ([]byte, error) {
	if r == nil || isNil(r) {
		return dst, fmt.Errorf("%w: nil record", ErrInvalidRecord)
	}
	if err := checkRecord(r, docs); err != nil {
		return dst, err
	}
	if enc == EncodingDefault {
		enc = c.enc
	}
	if enc == EncodingJSON {
		if b, ok := appendFastJSON(dst, r); ok {
			if n := len(b) - len(dst); n > c.maxBytes {
				return dst, fmt.Errorf("%w: %d bytes of JSON, limit %d", ErrTooLarge, n, c.maxBytes)
			}
			return b, nil
		}
	}
	return c.appendChecked(dst, enc, topic, r)
}

// SizeHint is room that usually holds r's JSON encoding by the fast
// appenders: its documents and strings plus some for the rest.
func SizeHint(r Record) int { return fastJSONSize(r) }

func (c *Codec) encodeJSON(r Record) ([]byte, error) {
	if fast(r) {
		if b, ok := appendFastJSON(make([]byte, 0, fastJSONSize(r)), r); ok {
			if len(b) > c.maxBytes {
				return nil, fmt.Errorf("%w: %d bytes of JSON, limit %d", ErrTooLarge, len(b), c.maxBytes)
			}
			return b, nil
		}
	}
	buf := c.jsonBufs.Get().(*bytes.Buffer)
	defer c.putJSONBuf(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		// The documents were checked; what is left is e.g. a NaN feature.
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	if len(b) > c.maxBytes {
		return nil, fmt.Errorf("%w: %d bytes of JSON, limit %d", ErrTooLarge, len(b), c.maxBytes)
	}
	return bytes.Clone(b), nil
}

func (c *Codec) putJSONBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		c.jsonBufs.Put(b)
	}
}

// appendAvro appends r's Avro encoding to dst (nil: a new slice of its
// size), or returns dst and an error.
func (c *Codec) appendAvro(dst []byte, topic string, r Record) ([]byte, error) {
	if c.reg == nil {
		return dst, fmt.Errorf("%w: cannot encode Avro", ErrNoRegistry)
	}
	k := r.kind()
	id, err := c.schemaID(context.Background(), topic, k)
	if err != nil {
		return dst, err
	}
	w := c.avroWriters.Get().(*avro.Writer)
	defer c.putAvroWriter(w)
	w.Reset(nil)
	w.Error = nil
	var hdr [wireHeaderLen]byte
	binary.BigEndian.PutUint32(hdr[1:], id)
	_, _ = w.Write(hdr[:])
	w.WriteVal(c.schemas[k].schema, r)
	if w.Error != nil {
		return dst, fmt.Errorf("%w: %w", ErrInvalidRecord, w.Error)
	}
	b := w.Buffer()
	if len(b) > c.maxBytes {
		return dst, fmt.Errorf("%w: %d bytes of Avro, limit %d", ErrTooLarge, len(b), c.maxBytes)
	}
	return append(dst, b...), nil
}

func (c *Codec) putAvroWriter(w *avro.Writer) {
	if cap(w.Buffer()) <= 64<<10 {
		w.Error = nil
		c.avroWriters.Put(w)
	}
}

// Prepare registers the schema of r's type under topic's subject now, so that
// Encode never waits for the registry. r may be a nil pointer, e.g.
// (*IntentResult)(nil). Without a registry it does nothing.
func (c *Codec) Prepare(ctx context.Context, topic string, r Record) error {
	if r == nil {
		return errors.New("schemas: Prepare with a nil Record")
	}
	if c.reg == nil {
		return nil
	}
	_, err := c.schemaID(ctx, topic, r.kind())
	return err
}

// schemaID returns the id of kind's schema under topic's subject, registering
// it on first use.
func (c *Codec) schemaID(ctx context.Context, topic string, k kind) (uint32, error) {
	if topic == "" {
		return 0, errors.New("schemas: empty topic: no subject for the schema")
	}
	key := subjectKey{topic: topic, kind: k}
	if v, ok := c.subjectIDs.Load(key); ok {
		return v.(uint32), nil
	}
	return c.registerOnce.do(ctx, key, func() (uint32, error) {
		if v, ok := c.subjectIDs.Load(key); ok {
			return v.(uint32), nil
		}
		subject := Subject(topic)
		id, err := c.reg.Register(ctx, subject, c.schemas[k].compact)
		if err != nil {
			return 0, fmt.Errorf("schemas: registering %s under %s: %w", c.schemas[k].name, subject, err)
		}
		if id < 0 || uint64(id) > 1<<32-1 {
			return 0, fmt.Errorf("schemas: registry gave %s the id %d, outside the wire format's range", subject, id)
		}
		// The registry vouches that id is our schema: records written with
		// it decode without asking again.
		c.writerByID.LoadOrStore(uint32(id), writerSchema{schema: c.schemas[k].schema})
		c.subjectIDs.Store(key, uint32(id))
		return uint32(id), nil
	})
}

// Decode decodes data into r, which it overwrites. It reads both encodings:
// JSON if the first byte (after optional whitespace) is '{', the Confluent
// wire format if it is 0 (the writer schema is fetched by id from the
// registry once, then cached, and resolved against r's schema, so records of
// older and newer schema versions decode). Unknown JSON fields are ignored;
// enum symbols the reader does not know become "unknown". Strings must be
// Unicode: invalid UTF-8 (in JSON also a \u escape of a lone surrogate) is
// ErrMalformed, never turned into U+FFFD, so two different ids never read as
// one.
//
// Every error is a *DecodeError; ErrorClass gives its class. Decode never
// panics on any input, and rejects records larger than the codec's limit
// before decoding them. It may wait for the registry the first time it sees a
// schema id.
func (c *Codec) Decode(data []byte, r Record) error {
	if r == nil || isNil(r) {
		return &DecodeError{Class: ClassOther, Err: errors.New("schemas: Decode into a nil record")}
	}
	if len(data) == 0 {
		return &DecodeError{Class: ClassEmpty, Err: ErrEmpty}
	}
	if len(data) > c.maxBytes {
		return decodeErr(ClassTooLarge, ErrTooLarge, "%d bytes, limit %d", len(data), c.maxBytes)
	}
	if data[0] == 0 {
		return c.decodeAvro(data, r)
	}
	if firstNonSpace(data) == '{' {
		return c.decodeJSON(data, r)
	}
	return decodeErr(ClassUnknownFormat, ErrUnknownFormat, "first byte 0x%02x: want '{' (JSON) or 0x00 (Confluent wire format)", data[0])
}

// firstNonSpace returns the first byte of data that is not JSON whitespace,
// or 0.
func firstNonSpace(data []byte) byte {
	for _, b := range data {
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			return b
		}
	}
	return 0
}

func (c *Codec) decodeJSON(data []byte, r Record) error {
	reset(r)
	if err := CheckJSONText(data); err != nil {
		return decodeErr(ClassMalformedJSON, ErrMalformed, "%s: %v", SchemaName(r), err)
	}
	if validJSON(data) && decodeFastJSON(data, r) {
		normalizeEnums(r)
		return nil
	}
	if err := json.Unmarshal(data, r); err != nil {
		return decodeErr(ClassMalformedJSON, ErrMalformed, "%s: %v", SchemaName(r), err)
	}
	normalizeEnums(r)
	return nil
}

func (c *Codec) decodeAvro(data []byte, r Record) error {
	if len(data) < wireHeaderLen {
		return decodeErr(ClassMalformedAvro, ErrMalformed, "%d bytes, shorter than the wire format header", len(data))
	}
	if c.reg == nil {
		return &DecodeError{Class: ClassNoRegistry, Err: fmt.Errorf("%w: cannot decode an Avro record", ErrNoRegistry)}
	}
	id := binary.BigEndian.Uint32(data[1:wireHeaderLen])
	k := r.kind()
	rs, err := c.readerSchema(id, k)
	if err == nil {
		err = rs.err
	}
	if err != nil {
		return err
	}
	body := data[wireHeaderLen:]
	if rs.scan != nil {
		if err := scanAvro(rs.scan, body); err != nil {
			return decodeErr(ClassMalformedAvro, ErrMalformed, "%s (schema id %d): %v", c.schemas[k].name, id, err)
		}
	}

	reset(r)
	rd := c.avroReaders.Get().(*avro.Reader)
	rd.Reset(body)
	rd.Error = nil
	rd.ReadVal(rs.schema, r)
	err = rd.Error
	if err == nil {
		// Peek sets io.EOF at the end of the input: anything else is trailing.
		rd.Peek()
		if rd.Error == nil {
			err = errors.New("trailing bytes after the record")
		}
	}
	rd.Error = nil
	rd.Reset(nil)
	c.avroReaders.Put(rd)
	if err != nil {
		return decodeErr(ClassMalformedAvro, ErrMalformed, "%s (schema id %d): %v", c.schemas[k].name, id, err)
	}
	if err := checkStrings(r); err != nil {
		return decodeErr(ClassMalformedAvro, ErrMalformed, "%s (schema id %d): %v", c.schemas[k].name, id, err)
	}
	if err := checkAvroDocs(r); err != nil {
		return &DecodeError{Class: ClassInvalidPayload, Err: err}
	}
	return nil
}

// readerSchema returns the schema that reads records written with schema id
// as kind: our schema resolved against the writer's, or in rs.err why there
// is none.
func (c *Codec) readerSchema(id uint32, k kind) (resolvedSchema, error) {
	key := resolvedKey{id: id, kind: k}
	if v, ok := c.readerByID.Load(key); ok {
		return v.(resolvedSchema), nil
	}
	writer, err := c.writerSchema(id)
	if err != nil {
		return resolvedSchema{}, err
	}
	reader := c.schemas[k].schema
	var rs resolvedSchema
	if writer.Fingerprint() == reader.Fingerprint() {
		rs.schema = reader
	} else if s, err := avro.NewSchemaCompatibility().Resolve(reader, writer); err != nil {
		rs.err = decodeErr(ClassIncompatibleSchema, ErrIncompatibleSchema, "schema id %d cannot be read as %s: %v", id, c.schemas[k].name, err)
	} else {
		rs.schema = s
		if hasArrayOrMap(writer) {
			rs.scan = writer
		}
	}
	c.readerByID.Store(key, rs)
	return rs, nil
}

// writerSchema returns the schema with the given id, from the cache or the
// registry.
func (c *Codec) writerSchema(id uint32) (avro.Schema, error) {
	if v, ok := c.writerByID.Load(id); ok {
		ws := v.(writerSchema)
		return ws.schema, ws.err
	}
	ws, err := c.fetchOnce.do(context.Background(), id, func() (writerSchema, error) {
		if v, ok := c.writerByID.Load(id); ok {
			return v.(writerSchema), nil
		}
		ws, cache := c.fetchWriterSchema(id)
		if cache {
			c.writerByID.Store(id, ws)
		}
		return ws, nil
	})
	if err != nil { // only a context error, which Background never has
		return nil, &DecodeError{Class: ClassRegistryUnavailable, Err: fmt.Errorf("%w: %w", ErrRegistryUnavailable, err)}
	}
	return ws.schema, ws.err
}

// fetchWriterSchema asks the registry for schema id and parses it. It reports
// whether the outcome may be cached.
func (c *Codec) fetchWriterSchema(id uint32) (ws writerSchema, cache bool) {
	text, err := c.reg.SchemaByID(context.Background(), int(id))
	switch {
	case errors.Is(err, ErrUnknownSchemaID):
		return writerSchema{err: &DecodeError{Class: ClassUnknownSchema, Err: err}}, false
	case errors.Is(err, ErrIncompatibleSchema):
		return writerSchema{err: &DecodeError{Class: ClassIncompatibleSchema, Err: err}}, true
	case errors.Is(err, ErrRegistryUnavailable):
		return writerSchema{err: &DecodeError{Class: ClassRegistryUnavailable, Err: err}}, false
	case err != nil:
		// Any other registry reply (401, 403, a broken reply): the record is
		// not at fault; treat it as the registry failing.
		return writerSchema{err: decodeErr(ClassRegistryUnavailable, ErrRegistryUnavailable, "schema id %d: %v", id, err)}, false
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return writerSchema{err: decodeErr(ClassIncompatibleSchema, ErrIncompatibleSchema, "schema id %d does not parse: %v", id, err)}, true
	}
	if hasZeroSizeArray(s) {
		return writerSchema{err: decodeErr(ClassIncompatibleSchema, ErrIncompatibleSchema, "schema id %d has an array of zero-size items, which this reader refuses", id)}, true
	}
	return writerSchema{schema: s}, true
}
