package intents

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Control records travel on the intent topics beside the ordinary ones and
// are told apart by a header, so that agents and tools in any language can
// recognise them without a schema of their own.
const (
	// HeaderControl marks a control record; its value says which kind.
	HeaderControl = "switchboard.control"
	// ControlCancel is a cancellation. On the requests topic it asks the
	// router to resolve a pending intent `cancelled`; on an agent's request
	// topic it tells the agent to stop working on the intent.
	ControlCancel = "cancel"
)

// Cancel is the value of a cancel record: always JSON, never registry
// encoded. Key: IntentID.
type Cancel struct {
	IntentID string `json:"intent_id"`
	Reason   string `json:"reason,omitempty"`
	// Tenant, when set, is the tenant the canceller acts for: the router
	// cancels only an intent of that tenant. The API sets it from the
	// caller's credential; records written to Kafka directly are trusted as
	// written, like intents (Kafka ACLs guard that door).
	Tenant string `json:"tenant,omitempty"`
}

// MarshalCancel encodes a cancel record's value.
func MarshalCancel(c Cancel) ([]byte, error) {
	if !ValidID(c.IntentID) {
		return nil, fmt.Errorf("intents: cancel: intent_id %q is not a valid id", c.IntentID)
	}
	return json.Marshal(c)
}

// UnmarshalCancel decodes a cancel record. key is the record's key; an empty
// value cancels the intent the key names.
func UnmarshalCancel(key, value []byte) (Cancel, error) {
	var c Cancel
	if len(value) > 0 {
		if err := json.Unmarshal(value, &c); err != nil {
			return Cancel{}, fmt.Errorf("intents: cancel record is not JSON: %w", err)
		}
	}
	if c.IntentID == "" {
		c.IntentID = string(key)
	}
	if !ValidID(c.IntentID) {
		return Cancel{}, errors.New(`intents: cancel record: "intent_id" (or the key) is not a valid id`)
	}
	return c, nil
}
