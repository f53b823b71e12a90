package intents

import "strings"

// Tenants namespace intents and context entities. An intent's identity is
// (tenant, intent_id), with tenant "" when the intent has none (authentication
// off, or a record produced to Kafka without one): two tenants may use the
// same intent_id and are then two intents, each with its one result. A
// context entity's identity is (tenant, entity_id) the same way.
//
// Records on the wire keep the bare id as their Kafka key (so partitioning
// stays by id, and kcat users see the id they chose) and carry the tenant in
// the record. Where one string must name the pair (the router's tables, the
// keys of compacted topics), it is Scoped(tenant, id).

// TenantSeparator joins a tenant and an id in Scoped. It is a control
// character, which a valid tenant (ValidLabel), intent id (ValidID) or
// entity id never holds, so a scoped key splits one way only and never
// equals a bare id.
const TenantSeparator = "\x1f"

// Scoped is the one string that names id in tenant's namespace: id itself
// for tenant "", else tenant + TenantSeparator + id. For valid tenants and
// ids it is unambiguous: two different pairs never give the same string.
func Scoped(tenant, id string) string {
	if tenant == "" {
		return id
	}
	return tenant + TenantSeparator + id
}

// SplitScoped is the inverse of Scoped: the tenant ("" for none) and the id
// a scoped key names.
func SplitScoped(key string) (tenant, id string) {
	if t, i, ok := strings.Cut(key, TenantSeparator); ok {
		return t, i
	}
	return "", key
}

// TenantOf returns the tenant an optional tenant field names: "" for none.
func TenantOf(t *string) string {
	if t == nil {
		return ""
	}
	return *t
}
