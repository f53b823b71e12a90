package schemas

import "fmt"

// Encoding is how a record is written.
type Encoding uint8

const (
	// EncodingDefault is the codec's own encoding: Avro if it has a registry,
	// else JSON. It is the zero value, so an unset config field means "as the
	// codec does".
	EncodingDefault Encoding = iota
	// EncodingJSON writes a JSON object with the Avro field names, payloads and
	// answers embedded as JSON values.
	EncodingJSON
	// EncodingAvro writes the Confluent wire format: magic byte 0, the 4-byte
	// big-endian schema id, the Avro binary body.
	EncodingAvro
)

// String returns "default", "json" or "avro".
func (e Encoding) String() string {
	switch e {
	case EncodingDefault:
		return "default"
	case EncodingJSON:
		return "json"
	case EncodingAvro:
		return "avro"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// ParseEncoding parses "json", "avro", or "" / "default" (EncodingDefault).
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "", "default":
		return EncodingDefault, nil
	case "json":
		return EncodingJSON, nil
	case "avro":
		return EncodingAvro, nil
	}
	return 0, fmt.Errorf("schemas: unknown encoding %q (want json or avro)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (e Encoding) MarshalText() ([]byte, error) {
	if e > EncodingAvro {
		return nil, fmt.Errorf("schemas: unknown encoding %d", uint8(e))
	}
	return []byte(e.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, so config files can say
// `encoding: json`.
func (e *Encoding) UnmarshalText(b []byte) error {
	v, err := ParseEncoding(string(b))
	if err != nil {
		return err
	}
	*e = v
	return nil
}
