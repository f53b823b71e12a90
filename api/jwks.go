package api

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Limits of a JWKS fetch.
const (
	DefaultJWKSRefresh = 10 * time.Minute
	// MaxJWKSBytes caps a JWKS document; a larger one is refused.
	MaxJWKSBytes = 1 << 20
	// jwksTimeout bounds one fetch.
	jwksTimeout = 5 * time.Second
	// jwksRetryAfter is the least time between two fetches, so that tokens
	// with unknown key ids cannot make the server hammer the key server.
	jwksRetryAfter = 30 * time.Second
)

// jwks is a key set fetched from a JWKS URL (RFC 7517): RS256 keys by key
// id, refreshed when older than refresh, or when a token names a key id it
// does not hold (at most once every jwksRetryAfter). A failed fetch keeps
// the keys held. It is safe for concurrent use; one fetch runs at a time.
type jwks struct {
	url     string
	refresh time.Duration
	clock   clockwork.Clock
	client  *http.Client
	log     *slog.Logger

	fetch sync.Mutex // held while fetching

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
}

func newJWKS(url string, refresh time.Duration, clock clockwork.Clock, log *slog.Logger) *jwks {
	if refresh <= 0 {
		refresh = DefaultJWKSRefresh
	}
	return &jwks{url: url, refresh: refresh, clock: clock, client: &http.Client{Timeout: jwksTimeout}, log: log, keys: map[string]*rsa.PublicKey{}}
}

// keysFor returns the keys a token with key id kid may be verified with:
// that key if kid is set, else every key held.
func (j *jwks) keysFor(kid string) []*rsa.PublicKey {
	j.mu.Lock()
	stale := j.fetched.IsZero() || j.clock.Since(j.fetched) >= j.refresh
	_, known := j.keys[kid]
	mayRetry := j.tried.IsZero() || j.clock.Since(j.tried) >= jwksRetryAfter
	j.mu.Unlock()
	if (stale || (kid != "" && !known)) && mayRetry {
		j.load()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if kid != "" {
		if k := j.keys[kid]; k != nil {
			return []*rsa.PublicKey{k}
		}
		return nil
	}
	out := make([]*rsa.PublicKey, 0, len(j.keys))
	for _, k := range j.keys {
		out = append(out, k)
	}
	return out
}

// load fetches the key set once (concurrent callers wait for the one
// fetch in progress).
func (j *jwks) load() {
	j.fetch.Lock()
	defer j.fetch.Unlock()
	j.mu.Lock()
	if !j.tried.IsZero() && j.clock.Since(j.tried) < jwksRetryAfter && !j.fetched.IsZero() && j.clock.Since(j.fetched) < j.refresh {
		j.mu.Unlock()
		return // another caller just fetched
	}
	j.tried = j.clock.Now()
	j.mu.Unlock()
	keys, err := j.get()
	if err != nil {
		j.log.Warn("JWKS fetch failed; keeping the keys held", slog.String("url", j.url), slog.Any("error", err))
		return
	}
	j.mu.Lock()
	j.keys, j.fetched = keys, j.clock.Now()
	j.mu.Unlock()
}

func (j *jwks) get() (map[string]*rsa.PublicKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", j.url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", MaxJWKSBytes)
	}
	return parseJWKS(b)
}

// parseJWKS reads the RSA signing keys of a JWKS document (kty RSA, use
// sig or absent, alg RS256 or absent, at least 2048 bits); others are
// skipped.
func parseJWKS(b []byte) (map[string]*rsa.PublicKey, error) {
	var doc struct {
		Keys []struct {
			Kty string `json:"kty"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			Kid string `json:"kid"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %v", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range doc.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "RS256") {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < 2048 || pub.E < 3 {
			continue
		}
		keys[k.Kid] = pub
	}
	return keys, nil
}
