package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Registry is a small client of the Confluent Schema Registry REST API: just
// what the codec needs, registering a schema under a subject and fetching a
// schema by id. It is safe for concurrent use and holds no goroutines; the
// codec caches what it learns, so Registry itself does not.
type Registry struct {
	base     string // without trailing slash
	client   *http.Client
	user     string
	password string
	auth     bool
	timeout  time.Duration
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithBasicAuth sends HTTP basic authentication with every request (Confluent
// Cloud: the API key and secret).
func WithBasicAuth(user, password string) RegistryOption {
	return func(r *Registry) { r.user, r.password, r.auth = user, password, true }
}

// WithHTTPClient makes the Registry use c (for TLS settings, proxies, a
// transport with metrics). The default is a client on http.DefaultTransport.
func WithHTTPClient(c *http.Client) RegistryOption {
	return func(r *Registry) {
		if c != nil {
			r.client = c
		}
	}
}

// WithRequestTimeout bounds each request, on top of any deadline of the
// caller's context. The default is 10s; d <= 0 keeps it.
func WithRequestTimeout(d time.Duration) RegistryOption {
	return func(r *Registry) {
		if d > 0 {
			r.timeout = d
		}
	}
}

const (
	defaultRegistryTimeout = 10 * time.Second
	registryContentType    = "application/vnd.schemaregistry.v1+json"
	maxRegistryReply       = 4 << 20 // a schema; Confluent caps schemas well below
)

// NewRegistry returns a client of the Schema Registry at rawURL, e.g.
// "http://127.0.0.1:8081". It does not contact the registry.
func NewRegistry(rawURL string, opts ...RegistryOption) (*Registry, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("schemas: registry URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("schemas: registry URL %q: want http(s)://host[:port][/path]", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("schemas: registry URL %q: no query or fragment allowed", rawURL)
	}
	r := &Registry{
		base:    strings.TrimRight(u.String(), "/"),
		client:  &http.Client{},
		timeout: defaultRegistryTimeout,
	}
	if u.User != nil {
		// Credentials in the URL are a common way to pass them; move them to
		// the Authorization header and keep them out of error messages.
		pw, _ := u.User.Password()
		r.user, r.password, r.auth = u.User.Username(), pw, true
		u.User = nil
		r.base = strings.TrimRight(u.String(), "/")
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// URL returns the registry's base URL, without credentials.
func (r *Registry) URL() string { return r.base }

// Register registers schema (Avro schema JSON) under subject and returns its
// id. Registering a schema the subject already has returns the existing id.
// The registry checks compatibility with the subject's earlier versions; an
// incompatible schema fails with a *RegistryError with status 409.
func (r *Registry) Register(ctx context.Context, subject, schema string) (int, error) {
	if subject == "" {
		return 0, errors.New("schemas: register: empty subject")
	}
	body, err := json.Marshal(struct {
		Schema string `json:"schema"`
	}{schema})
	if err != nil {
		return 0, fmt.Errorf("schemas: register: %w", err)
	}
	var reply struct {
		ID *int `json:"id"`
	}
	path := "/subjects/" + url.PathEscape(subject) + "/versions"
	if err := r.do(ctx, http.MethodPost, path, body, nil, &reply); err != nil {
		return 0, err
	}
	if reply.ID == nil {
		return 0, fmt.Errorf("schemas: schema registry POST %s: reply has no id", path)
	}
	return *reply.ID, nil
}

// SchemaByID returns the text of the schema with the given id. An id the
// registry does not know fails with an error wrapping ErrUnknownSchemaID; a
// schema that is not Avro (Protobuf, JSON Schema) with one wrapping
// ErrIncompatibleSchema.
func (r *Registry) SchemaByID(ctx context.Context, id int) (string, error) {
	var reply struct {
		Schema     *string `json:"schema"`
		SchemaType string  `json:"schemaType"`
	}
	path := "/schemas/ids/" + strconv.Itoa(id)
	if err := r.do(ctx, http.MethodGet, path, nil, ErrUnknownSchemaID, &reply); err != nil {
		return "", err
	}
	if reply.Schema == nil {
		return "", fmt.Errorf("schemas: schema registry GET %s: reply has no schema", path)
	}
	if reply.SchemaType != "" && !strings.EqualFold(reply.SchemaType, "AVRO") {
		return "", fmt.Errorf("%w: schema id %d is %s, not Avro", ErrIncompatibleSchema, id, reply.SchemaType)
	}
	return *reply.Schema, nil
}

// do sends one request and decodes a successful JSON reply into out. A 404
// wraps notFound (if not nil).
func (r *Registry) do(ctx context.Context, method, path string, body []byte, notFound error, out any) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return fmt.Errorf("schemas: schema registry %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", registryContentType+", application/json")
	if body != nil {
		req.Header.Set("Content-Type", registryContentType)
	}
	if r.auth {
		req.SetBasicAuth(r.user, r.password)
	}

	resp, err := r.client.Do(req)
	if err != nil {
		// url.Error repeats the URL; it has no credentials (they are moved
		// to the header).
		return fmt.Errorf("%w: %s %s: %w", ErrRegistryUnavailable, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistryReply+1))
	if err != nil {
		return fmt.Errorf("%w: %s %s: reading reply: %w", ErrRegistryUnavailable, method, path, err)
	}
	if len(data) > maxRegistryReply {
		return fmt.Errorf("schemas: schema registry %s %s: reply larger than %d bytes", method, path, maxRegistryReply)
	}

	if resp.StatusCode/100 != 2 {
		re := &RegistryError{Method: method, Path: path, StatusCode: resp.StatusCode}
		var e struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && (e.Code != 0 || e.Message != "") {
			re.Code, re.Message = e.Code, e.Message
		} else {
			re.Message = snippet(data)
		}
		switch {
		case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout,
			resp.StatusCode == http.StatusTooManyRequests:
			re.kind = ErrRegistryUnavailable
		case resp.StatusCode == http.StatusNotFound:
			re.kind = notFound
		}
		return re
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("schemas: schema registry %s %s: bad reply: %w", method, path, err)
	}
	return nil
}

// snippet returns the start of a non-JSON error body, for error messages.
func snippet(b []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(b))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}
