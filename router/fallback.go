package router

import (
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The fallback cache: the last good answer per intent type and cache key,
// the key scoped to the intent's tenant (cacheKeyOf), shared by every
// instance through the compacted fallback-cache topic.

// remember puts a good answer in the fallback cache, here and, through the
// fallback-cache topic, in every instance.
func (e *engine) remember(r *route, key string, answer *schemas.JSON, nowMs int64, t *track) {
	if answer == nil || r.cacheKey == "" {
		return
	}
	e.cache.Put(r.name, key, string(*answer), nowMs)
	fa := &schemas.FallbackAnswer{IntentType: r.name, CacheKey: key, Answer: *answer, AnsweredAt: nowMs}
	value, err := e.codec.Encode(e.topics.FallbackCache, fa)
	if err != nil {
		e.encodeFailed(t, err)
		return
	}
	e.emit(&port.Output{Topic: e.topics.FallbackCache, Key: []byte(r.name + "/" + key), Value: value}, t)
}

// onFallbackAnswer applies an answer read from the fallback-cache topic
// (written by any instance, this one included).
func (e *engine) onFallbackAnswer(fa *schemas.FallbackAnswer) {
	e.cache.Put(fa.IntentType, fa.CacheKey, string(fa.Answer), fa.AnsweredAt)
}

// cacheKeyOf is the fallback-cache key of an intent: the field the intent
// type names, scoped to the intent's tenant, so that one tenant's answer is
// never another tenant's fallback.
func cacheKeyOf(key string, req *schemas.IntentRequest) string {
	var v *string
	switch key {
	case config.CacheKeyContextRef:
		v = req.ContextRef
	case config.CacheKeySessionID:
		v = req.SessionID
	case config.CacheKeyTenant:
		v = req.Tenant
	}
	k := ""
	if v != nil {
		k = *v
	}
	if key != config.CacheKeyTenant && req.Tenant != nil && *req.Tenant != "" {
		// Scoped, not tenant + "/": tenant "a/b" with ref "c" and tenant
		// "a" with ref "b/c" would share a key.
		k = intents.Scoped(*req.Tenant, k)
	}
	return k
}

// fallback is what an intent that gets no answer resolves with: the cache,
// else the static answer, else nothing (timed_out).
func (e *engine) fallback(p *pending, nowMs int64) (*schemas.JSON, schemas.Outcome, schemas.FallbackKind) {
	if p.route.cacheKey != "" {
		if a, _, ok := e.cache.Get(p.route.name, p.cacheKey, p.route.cacheMaxAge, nowMs); ok {
			j := schemas.JSON(a)
			return &j, schemas.OutcomeFallbackCache, schemas.FallbackCache
		}
	}
	if p.route.static != nil {
		return p.route.static, schemas.OutcomeFallbackStatic, schemas.FallbackStatic
	}
	return nil, schemas.OutcomeTimedOut, schemas.FallbackNone
}
