package e2b

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Patterns shared by the tool schemas. They keep path parameters to the
// shapes E2B accepts, so an argument can never reshape a request path.
const (
	// sandboxIDPattern is E2B's id ("i" and 20 characters), optionally with
	// the legacy "-<clientID>" suffix that E2B strips.
	sandboxIDPattern  = `^i[a-z0-9]{20}(-[A-Za-z0-9]+)?$`
	templateIDPattern = `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`
	// templateRefPattern also allows aliases, namespace/alias and a :tag.
	templateRefPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(/[A-Za-z0-9][A-Za-z0-9._-]{0,127})?(:[A-Za-z0-9._-]{1,128})?$`
)

// schemaEdit is one adjustment of an inferred schema. Each helper panics on
// an unknown property: a typo in a tool definition must fail at start-up.
type schemaEdit func(s *jsonschema.Schema)

func edits(es ...schemaEdit) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		for _, e := range es {
			e(s)
		}
	}
}

func prop(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("e2b: schema has no property %q", name))
	}
	return p
}

// withDefault sets a property's default.
func withDefault(name string, v any) schemaEdit {
	return func(s *jsonschema.Schema) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		prop(s, name).Default = b
	}
}

// withRange bounds a numeric property.
func withRange(name string, lo, hi float64) schemaEdit {
	return func(s *jsonschema.Schema) {
		p := prop(s, name)
		p.Minimum, p.Maximum = jsonschema.Ptr(lo), jsonschema.Ptr(hi)
	}
}

// withEnum restricts a string property.
func withEnum(name string, values ...string) schemaEdit {
	return func(s *jsonschema.Schema) {
		p := prop(s, name)
		p.Enum = nil
		for _, v := range values {
			p.Enum = append(p.Enum, v)
		}
	}
}

// withPattern constrains a string property.
func withPattern(name, pattern string) schemaEdit {
	return func(s *jsonschema.Schema) { prop(s, name).Pattern = pattern }
}

// withMaxLength bounds a string property.
func withMaxLength(name string, n int) schemaEdit {
	return func(s *jsonschema.Schema) { prop(s, name).MaxLength = jsonschema.Ptr(n) }
}

// withMaxProperties bounds a map property.
func withMaxProperties(name string, n int) schemaEdit {
	return func(s *jsonschema.Schema) { prop(s, name).MaxProperties = jsonschema.Ptr(n) }
}

// withFormat sets a string property's format (for clients; the validator
// treats it as an annotation, so the tool still parses the value).
func withFormat(name, format string) schemaEdit {
	return func(s *jsonschema.Schema) { prop(s, name).Format = format }
}

// Common edits.
var (
	sandboxIDEdit = withPattern("sandbox_id", sandboxIDPattern)
	pageEdits     = []schemaEdit{withRange("limit", 1, 100), withDefault("limit", 50), withMaxLength("next_token", 1024)}
)

func pageSchema(more ...schemaEdit) func(*jsonschema.Schema) {
	return edits(append(append([]schemaEdit{}, pageEdits...), more...)...)
}

// timeProperties are the output properties, besides every "*_at", that hold
// an RFC 3339 time.
var timeProperties = map[string]bool{"timestamp": true, "from": true, "to": true, "window_start": true, "window_end": true}

// outputEdits adjusts an inferred output schema: every time string is
// declared as format date-time, so a client knows to parse it. (The format is
// an annotation for the validator: an omitted time is absent, never "".)
func outputEdits(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if p.Type == "string" && (strings.HasSuffix(name, "_at") || timeProperties[name]) {
			p.Format = "date-time"
		}
		outputEdits(p)
	}
	outputEdits(s.Items)
	outputEdits(s.AdditionalProperties)
}
