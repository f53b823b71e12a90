package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// callHeader carries, from the HTTP layer to the tool handler, what the
// SDK does not expose about a tools/call: its JSON-RPC id and the
// task-augmentation of 2025-11-25 (params.task). The endpoint deletes any
// such header a client sends before setting it.
const callHeader = "Switchboard-Mcp-Call"

// callInfo is what callHeader carries (base64url of its JSON).
type callInfo struct {
	ID   json.RawMessage `json:"id"`
	Task *taskParams     `json:"task,omitempty"`
}

// taskParams is the "task" field of a task-augmented request (2025-11-25).
type taskParams struct {
	TTL *int64 `json:"ttl,omitempty"`
}

func encodeCallInfo(ci callInfo) string {
	b, _ := json.Marshal(ci)
	return base64.RawURLEncoding.EncodeToString(b)
}

// callInfoOf reads callHeader from the request's header (zero if absent or
// unreadable).
func callInfoOf(h http.Header) callInfo {
	var ci callInfo
	if h == nil {
		return ci
	}
	b, err := base64.RawURLEncoding.DecodeString(h.Get(callHeader))
	if err != nil || len(b) == 0 {
		return ci
	}
	_ = json.Unmarshal(b, &ci)
	return ci
}

// intentIDFor derives a tools/call's intent id, so that the same call sent
// again is the same intent (the router drops the second publish, and the
// caller gets the first's result):
//
//   - in a session (the 2025-11-25 handshake), from the tenant, the session
//     id and the JSON-RPC id, which the client may not reuse within the
//     session: "mcp-" + hex(sha256(tenant, "session", session id, id))[:32];
//   - without a session (2026-07-28), from the tenant, the client's name and
//     version (_meta clientInfo), the JSON-RPC id, the tool and its
//     arguments: a call repeated with the same id and the same arguments
//     within the router's dedup window is the same intent.
//
// Without a JSON-RPC id (a batch holding several calls) there is nothing to
// derive from: ok is false and the caller draws a random id.
func intentIDFor(tenant, sessionID string, ci callInfo, client, tool string, args json.RawMessage) (string, bool) {
	if len(bytes.TrimSpace(ci.ID)) == 0 {
		return "", false
	}
	h := sha256.New()
	part := func(s []byte) {
		var n [8]byte
		for i, l := 0, len(s); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write(s)
	}
	part([]byte(tenant))
	if sessionID != "" {
		part([]byte("session"))
		part([]byte(sessionID))
		part(ci.ID)
	} else {
		part([]byte("stateless"))
		part([]byte(client))
		part(ci.ID)
		part([]byte(tool))
		part(canonical(args))
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))[:32], true
}

// canonical re-encodes a JSON document with sorted keys and no spaces, so
// that the same arguments written differently are the same call.
func canonical(raw json.RawMessage) []byte {
	var v any
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, err := json.Marshal(v) // maps are written with sorted keys
	if err != nil {
		return raw
	}
	return b
}
