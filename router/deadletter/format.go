package deadletter

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TableHeader is the first line of a table of letters (see WriteRow).
const TableHeader = "POSITION   DEAD-LETTERED AT          ORIGIN                            CLASS              KEY                                   REASON / VALUE"

// WriteRow writes l as two lines of a table: where it is, when it was
// dead-lettered, where from, its class, key and reason; then, indented, a
// preview of its value (at most previewBytes, on one line).
func WriteRow(w io.Writer, l *Letter, previewBytes int) error {
	_, err := fmt.Fprintf(w, "%-10s %-25s %-33s %-18s %-37s %s\n           value: %s\n",
		l.Position(), l.Timestamp.Format(timeLayout), origin(l), orDash(l.Class),
		orDash(preview(l.Key, 36)), orDash(oneLine(l.Message)), preview(l.Value, previewBytes))
	return err
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func origin(l *Letter) string {
	if l.OriginalTopic == "" {
		return "-"
	}
	s := l.OriginalTopic
	if l.OriginalPartition >= 0 {
		s += "[" + strconv.Itoa(int(l.OriginalPartition)) + "]"
	}
	if l.OriginalOffset >= 0 {
		s += "@" + strconv.FormatInt(l.OriginalOffset, 10)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// preview shows b on one line, cut to n bytes: as text when it is UTF-8, as
// "base64:..." otherwise; "(empty)" or "(null)" when there is nothing.
func preview(b []byte, n int) string {
	switch {
	case b == nil:
		return "(null)"
	case len(b) == 0:
		return "(empty)"
	}
	s := ""
	if utf8.Valid(b) {
		s = oneLine(string(b))
	} else {
		s = "base64:" + base64.StdEncoding.EncodeToString(b)
	}
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// jsonLetter is a letter as one line of 'dlq list --json'.
type jsonLetter struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp string       `json:"timestamp"`
	Original  jsonOriginal `json:"original"`
	Error     jsonError    `json:"error"`
	Key       *string      `json:"key"`
	KeyEnc    string       `json:"key_encoding,omitempty"`
	Value     *string      `json:"value"`
	ValueEnc  string       `json:"value_encoding,omitempty"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonOriginal struct {
	Topic     string `json:"topic,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
}

type jsonError struct {
	Class   string `json:"class,omitempty"`
	Message string `json:"message,omitempty"`
}

type jsonHeader struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding,omitempty"`
}

// MarshalJSON encodes l as one JSON object: its position, timestamp
// (RFC 3339, UTC), original topic/partition/offset, error class and message,
// key, value and every header. The key, the value and header values are
// strings when they are UTF-8; otherwise they are base64 and the object says
// so ("key_encoding": "base64", "value_encoding": "base64", a header's
// "encoding": "base64"). A null key or value is null.
func (l *Letter) MarshalJSON() ([]byte, error) {
	j := jsonLetter{
		Topic: l.Topic, Partition: l.Partition, Offset: l.Offset,
		Timestamp: l.Timestamp.Format(time.RFC3339Nano),
		Original:  jsonOriginal{Topic: l.OriginalTopic},
		Error:     jsonError{Class: l.Class, Message: l.Message},
		Headers:   make([]jsonHeader, 0, len(l.Headers)),
	}
	if l.OriginalPartition >= 0 {
		j.Original.Partition = &l.OriginalPartition
	}
	if l.OriginalOffset >= 0 {
		j.Original.Offset = &l.OriginalOffset
	}
	j.Key, j.KeyEnc = text(l.Key)
	j.Value, j.ValueEnc = text(l.Value)
	for _, h := range l.Headers {
		v, enc := text(h.Value)
		if v == nil {
			v = new(string)
		}
		j.Headers = append(j.Headers, jsonHeader{Key: h.Key, Value: *v, Encoding: enc})
	}
	return json.Marshal(j)
}

// text returns b as a string, or base64 and "base64" when it is not UTF-8;
// nil for nil.
func text(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}
