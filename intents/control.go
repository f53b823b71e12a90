package intents

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard/schemas"
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
	// Tenant is the namespace of the intent to cancel, like an intent's
	// (see Scoped): the router cancels (Tenant, IntentID) only, so a cancel
	// without a tenant reaches only the intent of that id without one. The
	// API sets it from the caller's credential; records written to Kafka
	// directly are trusted as written, like intents (Kafka ACLs guard that
	// door). On an agent's topic the router's notice carries the intent's
	// tenant, so an agent serving two tenants' intents of one id stops the
	// right one.
	Tenant string `json:"tenant,omitempty"`
}

// MarshalCancel encodes a cancel record's value.
func MarshalCancel(c Cancel) ([]byte, error) {
	if !ValidID(c.IntentID) {
		return nil, fmt.Errorf("intents: cancel: intent_id %q is not a valid id", c.IntentID)
	}
	if c.Tenant != "" && !ValidLabel(c.Tenant) {
		return nil, fmt.Errorf("intents: cancel: tenant %q is not a valid tenant", c.Tenant)
	}
	return json.Marshal(c)
}

// UnmarshalCancel decodes a cancel record. key is the record's key; an empty
// value cancels the intent the key names.
func UnmarshalCancel(key, value []byte) (Cancel, error) {
	var c Cancel
	if len(value) > 0 {
		// Decoding would turn text that is not Unicode into U+FFFD, so
		// that the cancel named another intent than its writer's.
		if err := schemas.CheckJSONText(value); err != nil {
			return Cancel{}, fmt.Errorf("intents: cancel record: %w", err)
		}
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
	if c.Tenant != "" && !ValidLabel(c.Tenant) {
		return Cancel{}, errors.New(`intents: cancel record: "tenant" is not a valid tenant`)
	}
	return c, nil
}
