package lookup

import (
	"encoding/binary"
	"fmt"
)

// The store's keys. One pebble database holds, each under its own first
// byte:
//
//	r intent            → the result, JSON (schemas.IntentResult)
//	t intent            → the timeout event, JSON (schemas.IntentTimeout)
//	p intent            → the pending state, JSON (api.PendingState)
//	k partition key     → intent: which intent a changelog key is (tombstones carry only the key)
//	n tenant received id → nothing: a tenant's intents by the time the router received them
//	o kind partition offset → received intent: what a results or timeouts record wrote, for expiry
//	m ...               → metadata: format, topics, positions
//
// where intent is uvarint(len(id)) id tenant: the id comes first, length
// prefixed, so that every tenant's intent of one id shares a prefix (a
// lookup without tenants, with authentication off, scans that prefix only)
// and any bytes are safe in either part. Numbers are big-endian, so that
// byte order is numeric order.
const (
	pfxResult    = 'r'
	pfxTimeout   = 't'
	pfxPending   = 'p'
	pfxChangelog = 'k'
	pfxRecent    = 'n'
	pfxOffset    = 'o'
	pfxMeta      = 'm'
)

// Kind is one of the topics the store is materialised from.
type Kind byte

// The topics, as they appear in keys.
const (
	KindResults  Kind = 'r'
	KindTimeouts Kind = 't'
	KindPending  Kind = 'p'
)

// Kinds lists every Kind.
var Kinds = []Kind{KindResults, KindTimeouts, KindPending}

func (k Kind) String() string {
	switch k {
	case KindResults:
		return "results"
	case KindTimeouts:
		return "timeouts"
	case KindPending:
		return "pending"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// intentKey returns the key of tenant's intent id under prefix pfx.
func intentKey(pfx byte, tenant, id string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(id)+len(tenant))
	b = append(b, pfx)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return append(b, tenant...)
}

// idPrefix returns the prefix shared by every tenant's intent id under pfx.
func idPrefix(pfx byte, id string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(id))
	b = append(b, pfx)
	b = binary.AppendUvarint(b, uint64(len(id)))
	return append(b, id...)
}

// splitIntent returns the tenant and id of an intent key (any prefix).
func splitIntent(key []byte) (tenant, id string, ok bool) {
	if len(key) < 2 {
		return "", "", false
	}
	n, w := binary.Uvarint(key[1:])
	if w <= 0 || uint64(len(key)-1-w) < n {
		return "", "", false
	}
	rest := key[1+w:]
	return string(rest[n:]), string(rest[:n]), true
}

// recentKey returns the key of an intent in its tenant's list.
func recentKey(tenant string, receivedAt int64, id string) []byte {
	b := recentPrefix(tenant)
	b = binary.BigEndian.AppendUint64(b, uint64(receivedAt))
	return append(b, id...)
}

// recentPrefix returns the prefix of a tenant's list.
func recentPrefix(tenant string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(tenant)+8+64)
	b = append(b, pfxRecent)
	b = binary.AppendUvarint(b, uint64(len(tenant)))
	return append(b, tenant...)
}

// offsetKey returns the key of the record at partition/offset of a topic.
func offsetKey(k Kind, partition int32, offset int64) []byte {
	b := make([]byte, 0, 14)
	b = append(b, pfxOffset, byte(k))
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	return binary.BigEndian.AppendUint64(b, uint64(offset))
}

// offsetValue is what an offset key holds: when the intent was received
// (for its entry in the tenant's list) and its intent key.
func offsetValue(receivedAt int64, tenant, id string) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(receivedAt))
	return append(b, intentKey(0, tenant, id)...)
}

func parseOffsetValue(v []byte) (receivedAt int64, tenant, id string, ok bool) {
	if len(v) < 9 {
		return 0, "", "", false
	}
	tenant, id, ok = splitIntent(v[8:])
	return int64(binary.BigEndian.Uint64(v)), tenant, id, ok
}

// changelogKey returns the key under which a changelog record's Kafka key
// maps to its intent.
func changelogKey(partition int32, key []byte) []byte {
	b := make([]byte, 0, 5+len(key))
	b = append(b, pfxChangelog)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	return append(b, key...)
}

// Metadata keys.
var (
	metaFormat = []byte("mformat")
	metaTopic  = []byte("mtopic/") // + kind → name \x00 id
	metaPos    = []byte("mpos/")   // + kind + partition → next offset
)

// formatVersion is the layout above; a store of another version is rebuilt.
const formatVersion = "1"

func topicKey(k Kind) []byte { return append(append([]byte(nil), metaTopic...), byte(k)) }

func posKey(k Kind, partition int32) []byte {
	b := append(append([]byte(nil), metaPos...), byte(k))
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// prefixEnd returns the first key after every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // every byte 0xff: no upper bound
}
