package schemas

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const testSchema = `{"type":"record","name":"T","namespace":"x","fields":[{"name":"a","type":"string","doc":"kept","default":"z"}]}`

func TestRegistryRegisterAndFetch(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	var contentType, accept string
	fake.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost {
			contentType, accept = r.Header.Get("Content-Type"), r.Header.Get("Accept")
		}
		return false
	})
	reg, err := NewRegistry(fake.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	if reg.URL() != fake.URL() {
		t.Errorf("URL() = %q, want %q", reg.URL(), fake.URL())
	}
	id, err := reg.Register(bg, "topic/with slash-value", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "application/vnd.schemaregistry.v1+json" || !strings.Contains(accept, "schemaregistry") {
		t.Errorf("Content-Type %q, Accept %q", contentType, accept)
	}
	if !fake.SubjectExists("topic/with slash-value") {
		t.Error("subject name was mangled")
	}
	again, err := reg.Register(bg, "topic/with slash-value", testSchema)
	if err != nil || again != id {
		t.Errorf("registering again: %d, %v; want %d", again, err, id)
	}
	text, err := reg.SchemaByID(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	if text != testSchema {
		t.Errorf("SchemaByID = %s, want the schema as registered (docs and defaults kept)", text)
	}
}

func TestRegistryErrors(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := NewRegistry(fake.URL())
	if err != nil {
		t.Fatal(err)
	}

	_, err = reg.SchemaByID(bg, 4242)
	var re *RegistryError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound || re.Code != 40403 || re.Message == "" {
		t.Fatalf("unknown id: %#v", err)
	}
	if !errors.Is(err, ErrUnknownSchemaID) || IsTransient(err) {
		t.Errorf("unknown id: %v should wrap ErrUnknownSchemaID only", err)
	}
	if !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), re.Message) {
		t.Errorf("message lacks status or registry message: %v", err)
	}

	if _, err := reg.Register(bg, "s", "not json"); err == nil || !strings.Contains(err.Error(), "422") {
		t.Errorf("invalid schema: %v, want a 422", err)
	}

	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasSuffix(r.URL.Path, "/conflict/versions"):
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema"}`))
		case strings.HasSuffix(r.URL.Path, "/down/versions"):
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html>upstream down</html>"))
		case strings.HasSuffix(r.URL.Path, "/noid/versions"):
			_, _ = w.Write([]byte(`{}`))
		case r.URL.Path == "/schemas/ids/77":
			_, _ = w.Write([]byte(`{"schema":"syntax = \"proto3\";","schemaType":"PROTOBUF"}`))
		default:
			return false
		}
		return true
	})
	_, err = reg.Register(bg, "conflict", testSchema)
	if !errors.As(err, &re) || re.StatusCode != 409 || re.Code != 409 || !strings.Contains(err.Error(), "incompatible with an earlier") || IsTransient(err) {
		t.Errorf("409: %v", err)
	}
	_, err = reg.Register(bg, "down", testSchema)
	if !errors.As(err, &re) || re.StatusCode != 503 || re.Message != "<html>upstream down</html>" || !IsTransient(err) {
		t.Errorf("503: %v", err)
	}
	if _, err := reg.Register(bg, "noid", testSchema); err == nil {
		t.Error("a reply without id was accepted")
	}
	if _, err := reg.SchemaByID(bg, 77); !errors.Is(err, ErrIncompatibleSchema) {
		t.Errorf("protobuf schema: %v, want ErrIncompatibleSchema", err)
	}
	if _, err := reg.Register(bg, "", testSchema); err == nil {
		t.Error("empty subject accepted")
	}
}

func TestRegistryBasicAuth(t *testing.T) {
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("key:se:cret"))
	fake := srfake.New(srfake.WithAuth(want))
	defer fake.Close()

	noAuth, err := NewRegistry(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	var re *RegistryError
	if _, err := noAuth.Register(bg, "s", testSchema); !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without auth: %v, want 401", err)
	}

	withOpt, err := NewRegistry(fake.URL(), WithBasicAuth("key", "se:cret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withOpt.Register(bg, "s", testSchema); err != nil {
		t.Fatalf("WithBasicAuth: %v", err)
	}

	inURL, err := NewRegistry(strings.Replace(fake.URL(), "http://", "http://key:se%3Acret@", 1))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inURL.URL(), "cret") {
		t.Errorf("URL() leaks the password: %s", inURL.URL())
	}
	if _, err := inURL.SchemaByID(bg, 1); err != nil {
		t.Fatalf("credentials in the URL: %v", err)
	}
}

func TestRegistryTimeout(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	fake.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done() // hang until the client gives up
		return true
	})
	reg, err := NewRegistry(fake.URL(), WithRequestTimeout(50*time.Millisecond), WithHTTPClient(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = reg.SchemaByID(bg, 1)
	if !IsTransient(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("hung registry: %v after %v, want a transient error after ~50ms", err, time.Since(start))
	}
}

func TestNewRegistryRejects(t *testing.T) {
	for _, u := range []string{"", "localhost:8081", "ftp://x", "http://", "http://h/?q=1", "http://h/#f", "http://[::1"} {
		if _, err := NewRegistry(u); err == nil {
			t.Errorf("NewRegistry(%q) succeeded", u)
		}
	}
	r, err := NewRegistry("https://sr.example.com/prefix/")
	if err != nil || r.URL() != "https://sr.example.com/prefix" {
		t.Errorf("with path prefix: %v, %v", r, err)
	}
}
