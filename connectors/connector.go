package connectors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpgate/mcpgate"
)

// Connector is one upstream service the gateway can call on a workspace's
// behalf.
type Connector interface {
	// Name is the connector's stable id ("e2b"): the path segment of its
	// connection route and the prefix of its tool names.
	Name() string
	// CheckCredential validates the credential's shape and verifies it against
	// the upstream. Errors are coded: EInvalid for a malformed or rejected
	// credential, EUnavailable when the upstream cannot be reached.
	CheckCredential(ctx context.Context, credential mcpgate.Secret) error
	// CredentialHint returns a short, safe reminder of a credential
	// ("e2b_…9f3c") to show instead of it.
	CredentialHint(credential mcpgate.Secret) string
	// Tools returns the connector's tools. The slice and its tools must not be
	// modified by the caller.
	Tools() []*Tool
}

// Annotations are a tool's behaviour hints, published to MCP clients as-is.
// All four are explicit: MCP's defaults (destructive, open world) would
// otherwise apply to a nil value.
type Annotations struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Handler runs a tool with the workspace's credential and arguments already
// decoded and validated. Its result is marshalled as the tool's structured
// output.
type Handler func(ctx context.Context, credential mcpgate.Secret, args json.RawMessage) (any, error)

// Tool is one callable operation of a connector: its Spec as the connector
// declared it, with the schemas built from it.
type Tool struct {
	// Spec is what the connector declared. Its Schema and Output have been
	// applied to InputSchema and OutputSchema and are nil here.
	Spec
	// OutputSchema is the JSON schema of the tool's result, inferred from its
	// output type, so that MCP clients can validate and type the structured
	// content. Never mutate it.
	OutputSchema *jsonschema.Schema
	// InputSchema is the JSON schema of the arguments, with defaults and
	// bounds. Never mutate it: it is shared by every server.
	InputSchema *jsonschema.Schema

	resolved *jsonschema.Resolved
	run      func(ctx context.Context, credential mcpgate.Secret, args json.RawMessage) (any, error)

	// resolvedOut checks results against OutputSchema (ValidateOutput).
	resolvedOut *jsonschema.Resolved
}

// Spec describes a tool for NewTool.
type Spec struct {
	Name, Title, Description string
	Annotations              Annotations
	// CostsMoney marks tools that start or extend billed resources; a
	// workspace may require confirmation for all of them.
	CostsMoney bool
	// DefaultEnabled is the tool's state in a new workspace (kill: false).
	DefaultEnabled bool
	// DefaultApproval, when set, is the approval a new workspace demands;
	// unset is none.
	DefaultApproval mcpgate.Approval
	// Guard, when set, inspects each call read-only before it runs; see
	// Assessment. Follows names the tool whose policy Guard may make the
	// call follow, so that the tool's schema can offer what that policy
	// needs.
	Guard   Guard
	Follows string
	// Changes, when set, names the resource a call changes, from its
	// arguments alone (it runs before the guard, reads nothing and must
	// not fail). The gateway runs the guard and the call of every call
	// that changes one resource one at a time. Unset: the call changes no
	// one existing resource (it reads, or it creates).
	Changes func(args map[string]any) Resource
	// Timeout bounds one call of the tool; zero means the gateway's
	// default. A tool that fans out to many upstream calls sets a longer
	// one.
	Timeout time.Duration
	// Schema, when set, adjusts the schema inferred from the input type:
	// defaults, bounds, enums, patterns.
	Schema func(s *jsonschema.Schema)
	// Output, when set, adjusts the schema inferred from the output type
	// (formats, descriptions). It must keep accepting every value the tool
	// returns.
	Output func(s *jsonschema.Schema)
}

// NewTool builds a tool whose arguments decode into In and whose result is an
// Out. The input schema is inferred from In (json tags; fields without
// omitempty are required; unknown arguments are refused) and then adjusted by
// spec.Schema; the output schema is inferred from Out and adjusted by
// spec.Output. Out must be a struct (MCP wants an object as structured
// content). It panics on a schema that does not resolve: tools are built at
// start-up, and a broken one must stop the program, not fail on its first
// call.
func NewTool[In, Out any](spec Spec, run func(ctx context.Context, credential mcpgate.Secret, in In) (Out, error)) *Tool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: infer schema: %v", spec.Name, err))
	}
	if spec.Schema != nil {
		spec.Schema(schema)
	}
	portableNulls(schema)
	resolved, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve schema: %v", spec.Name, err))
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: infer output schema: %v", spec.Name, err))
	}
	if out.Type != "object" {
		panic(fmt.Sprintf("tool %s: output type must be a struct, not %s", spec.Name, out.Type))
	}
	nullableMaps(out)
	if spec.Output != nil {
		spec.Output(out)
	}
	portableNulls(out)
	resolvedOut, err := out.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve output schema: %v", spec.Name, err))
	}
	spec.Schema, spec.Output = nil, nil // applied above; a Tool's schemas are final
	return &Tool{
		Spec: spec, OutputSchema: out, resolvedOut: resolvedOut, InputSchema: schema, resolved: resolved,
		run: func(ctx context.Context, credential mcpgate.Secret, args json.RawMessage) (any, error) {
			var in In
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return nil, mcpgate.Errorf(mcpgate.EInvalid, "invalid arguments: %s", cleanJSONError(err))
			}
			return run(ctx, credential, in)
		},
	}
}

// DefaultApprovalMode is the approval a new workspace demands for the tool.
func (t *Tool) DefaultApprovalMode() mcpgate.Approval {
	if t.DefaultApproval.Valid() {
		return t.DefaultApproval
	}
	return mcpgate.ApprovalNone
}

// Decode applies the schema's defaults to raw arguments and validates them.
// It returns the arguments as they will be used, so that a confirmation or an
// audit row shows the call exactly as it runs. Empty or null arguments count
// as {}.
func (t *Tool) Decode(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil || args == nil {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a JSON object")
		}
		if dec.More() {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a single JSON object")
		}
		// The validator sees a json.Number as a string; numbers become
		// int64 (exact, when integral) or float64 before it runs.
		args = fromNumbers(args).(map[string]any)
		// A member sent as null means "not given", as the schema (which
		// does not list null, portableNulls) says by leaving it optional.
		args = dropNullMembers(args).(map[string]any)
	}
	if err := t.resolved.ApplyDefaults(&args); err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "invalid arguments: %s", err)
	}
	if err := t.resolved.Validate(args); err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "invalid arguments: %s", oneLine(err.Error()))
	}
	return args, nil
}

// Call validates raw arguments against the tool's schema, applies defaults and
// runs the tool.
func (t *Tool) Call(ctx context.Context, credential mcpgate.Secret, raw json.RawMessage) (any, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return nil, err
	}
	return t.CallDecoded(ctx, credential, args)
}

// CallDecoded runs the tool with arguments that Decode returned.
func (t *Tool) CallDecoded(ctx context.Context, credential mcpgate.Secret, args map[string]any) (any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a JSON object")
	}
	return t.run(ctx, credential, b)
}

// ValidateOutput checks a result of the tool, as it will be marshalled into
// structured content, against the tool's output schema. The gateway does not
// call it on every result (the schema is inferred from the very type the
// handler returns); tests do, so that a schema that rejects a real result
// cannot ship.
func (t *Tool) ValidateOutput(out any) error {
	b, err := MarshalOutput(out)
	if err != nil {
		return fmt.Errorf("marshal output: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("unmarshal output: %w", err)
	}
	if err := t.resolvedOut.Validate(v); err != nil {
		return fmt.Errorf("output of %s does not match its schema: %w", t.Name, err)
	}
	return nil
}

// portableNulls rewrites the members inference made nullable (pointers,
// slices and maps: "type":["null","boolean"]) to their one type, optional:
// clients read a single type everywhere (the MCP Inspector's --strict mode
// warns of every type array), and "may be absent" says what "may be null"
// did, since MarshalOutput leaves null members out and Decode drops null
// arguments. Array items keep their nullable type: an element cannot be
// left out of an array.
func portableNulls(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if single(p) {
			s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
		}
		portableNulls(p)
	}
	if s.AdditionalProperties != nil {
		single(s.AdditionalProperties)
		portableNulls(s.AdditionalProperties)
	}
	portableNulls(s.Items)
}

// single turns a ["null", X] schema into X; it reports whether it did.
func single(s *jsonschema.Schema) bool {
	if len(s.Types) != 2 || !slices.Contains(s.Types, "null") {
		return false
	}
	for _, t := range s.Types {
		if t != "null" {
			s.Type, s.Types = t, nil
		}
	}
	return true
}

// MarshalOutput encodes a tool's result as its structured content: JSON with
// every null object member left out (see portableNulls), members otherwise
// in the order encoding/json writes them.
func MarshalOutput(out any) ([]byte, error) {
	b, err := json.Marshal(out)
	if err != nil || !bytes.Contains(b, []byte("null")) {
		return b, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if err := copyWithoutNulls(dec, tok, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// copyWithoutNulls writes the value that starts with tok, leaving out
// object members whose value is null.
func copyWithoutNulls(dec *json.Decoder, tok json.Token, b *bytes.Buffer) error {
	switch v := tok.(type) {
	case json.Delim:
		isObject := v == '{'
		b.WriteRune(rune(v))
		first := true
		for dec.More() {
			var key json.Token
			if isObject {
				var err error
				if key, err = dec.Token(); err != nil {
					return err
				}
			}
			val, err := dec.Token()
			if err != nil {
				return err
			}
			if isObject && val == nil {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			if isObject {
				kb, _ := json.Marshal(key)
				b.Write(kb)
				b.WriteByte(':')
			}
			if err := copyWithoutNulls(dec, val, b); err != nil {
				return err
			}
		}
		end, err := dec.Token()
		if err != nil {
			return err
		}
		b.WriteRune(rune(end.(json.Delim)))
		return nil
	case json.Number:
		b.WriteString(v.String())
		return nil
	}
	vb, err := json.Marshal(tok)
	b.Write(vb)
	return err
}

// dropNullMembers removes null members of every object in v (a decoded
// JSON value).
func dropNullMembers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
			} else {
				v[k] = dropNullMembers(e)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = dropNullMembers(e)
		}
	}
	return v
}

// nullableMaps lets every map in s also be null: encoding/json writes a nil
// map without omitempty as null, and the inferred schema would refuse it.
// (Slices and pointers are already inferred as nullable.)
func nullableMaps(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	// A map is an object with no properties and a real (not "false")
	// additionalProperties schema.
	if s.Type == "object" && len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil {
		s.Types, s.Type = []string{"null", "object"}, ""
	}
	for _, p := range s.Properties {
		nullableMaps(p)
	}
	nullableMaps(s.Items)
	nullableMaps(s.AdditionalProperties)
}

// fromNumbers replaces every json.Number in v (a decoded JSON value) with an
// int64 when it is an integer that fits, and a float64 otherwise.
func fromNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64() // the decoder produced it, so it parses
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = fromNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = fromNumbers(e)
		}
	}
	return v
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func cleanJSONError(err error) string {
	return oneLine(strings.TrimPrefix(err.Error(), "json: "))
}

// Registry is the set of connectors a gateway serves, by name.
type Registry struct {
	byName map[string]Connector
	tools  map[string]*Tool
	owner  map[string]Connector // tool name -> its connector
	order  []string
}

// NewRegistry returns a registry of the given connectors. It panics when two
// connectors or two tools share a name: that is a wiring bug.
func NewRegistry(cs ...Connector) *Registry {
	r := &Registry{byName: map[string]Connector{}, tools: map[string]*Tool{}, owner: map[string]Connector{}}
	for _, c := range cs {
		if _, dup := r.byName[c.Name()]; dup {
			panic("connectors: duplicate connector " + c.Name())
		}
		r.byName[c.Name()] = c
		r.order = append(r.order, c.Name())
		for _, t := range c.Tools() {
			if _, dup := r.tools[t.Name]; dup {
				panic("connectors: duplicate tool " + t.Name)
			}
			r.tools[t.Name] = t
			r.owner[t.Name] = c
		}
	}
	sort.Strings(r.order)
	return r
}

// Connector returns the connector of that name.
func (r *Registry) Connector(name string) (Connector, bool) {
	c, ok := r.byName[name]
	return c, ok
}

// Names returns the connectors' names, sorted.
func (r *Registry) Names() []string { return r.order }

// ConnectorOf returns the connector that owns the tool.
func (r *Registry) ConnectorOf(tool string) (Connector, bool) {
	c, ok := r.owner[tool]
	return c, ok
}

// Tool returns the tool of that name.
func (r *Registry) Tool(name string) (*Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Tools returns every tool of every connector, ordered by connector, then as
// the connector lists them.
func (r *Registry) Tools() []*Tool {
	var out []*Tool
	for _, name := range r.order {
		out = append(out, r.byName[name].Tools()...)
	}
	return out
}
