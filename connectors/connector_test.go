package connectors_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

type listIn struct {
	Limit int    `json:"limit,omitempty" jsonschema:"how many"`
	State string `json:"state,omitempty" jsonschema:"running or paused"`
}

func newListTool(name string) *connectors.Tool {
	return connectors.NewTool(connectors.Spec{Name: name, Title: "List",
		Schema: func(s *jsonschema.Schema) {
			s.Properties["limit"].Default = json.RawMessage(`50`)
			s.Properties["limit"].Minimum = jsonschema.Ptr(1.0)
			s.Properties["limit"].Maximum = jsonschema.Ptr(100.0)
			s.Properties["state"].Enum = []any{"running", "paused"}
		}},
		func(_ context.Context, _ mcpgate.Secret, in listIn) (listIn, error) { return in, nil })
}

func TestTool_CallValidatesAndDefaults(t *testing.T) {
	tool := newListTool("demo_list")
	tests := []struct {
		name     string
		args     string
		want     listIn
		wantCode mcpgate.Code
	}{
		{name: "empty gets defaults", args: ``, want: listIn{Limit: 50}},
		{name: "null gets defaults", args: `null`, want: listIn{Limit: 50}},
		{name: "given values", args: `{"limit": 7, "state": "paused"}`, want: listIn{Limit: 7, State: "paused"}},
		{name: "over the maximum", args: `{"limit": 101}`, wantCode: mcpgate.EInvalid},
		{name: "below the minimum", args: `{"limit": 0}`, wantCode: mcpgate.EInvalid},
		{name: "fraction", args: `{"limit": 1.5}`, wantCode: mcpgate.EInvalid},
		{name: "wrong type", args: `{"limit": "10"}`, wantCode: mcpgate.EInvalid},
		{name: "unknown enum value", args: `{"state": "dead"}`, wantCode: mcpgate.EInvalid},
		{name: "unknown argument", args: `{"limt": 5}`, wantCode: mcpgate.EInvalid},
		{name: "not an object", args: `[1]`, wantCode: mcpgate.EInvalid},
		{name: "two objects", args: `{} {}`, wantCode: mcpgate.EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tool.Call(context.Background(), "secret", json.RawMessage(tt.args))
			if tt.wantCode != "" {
				if mcpgate.ErrorCode(err) != tt.wantCode {
					t.Fatalf("Call(%s) err = %v, want code %s", tt.args, err, tt.wantCode)
				}
				return
			}
			if err != nil || out.(listIn) != tt.want {
				t.Fatalf("Call(%s) = %+v, %v; want %+v", tt.args, out, err, tt.want)
			}
		})
	}
}

type fakeConnector struct {
	name  string
	tools []*connectors.Tool
}

func (f fakeConnector) Name() string                                          { return f.name }
func (f fakeConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (f fakeConnector) CredentialHint(mcpgate.Secret) string                  { return "" }
func (f fakeConnector) Tools() []*connectors.Tool                             { return f.tools }

func TestRegistry(t *testing.T) {
	a := fakeConnector{name: "a", tools: []*connectors.Tool{newListTool("a_list")}}
	b := fakeConnector{name: "b", tools: []*connectors.Tool{newListTool("b_list")}}
	r := connectors.NewRegistry(b, a)
	if c, ok := r.ConnectorOf("b_list"); !ok || c.Name() != "b" {
		t.Fatalf("ConnectorOf(b_list) = %v, %v; want b", c, ok)
	}
	if _, ok := r.ConnectorOf("nope"); ok {
		t.Fatal("ConnectorOf(nope) found a connector")
	}
	if tools := r.Tools(); len(tools) != 2 || tools[0].Name != "a_list" {
		t.Fatalf("Tools() = %v, want a_list first (connectors in name order)", tools)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewRegistry() with a duplicate tool name did not panic")
		}
	}()
	connectors.NewRegistry(a, fakeConnector{name: "c", tools: []*connectors.Tool{newListTool("a_list")}})
}

type mapOut struct {
	Labels   map[string]string `json:"labels"`
	Items    []string          `json:"items"`
	Optional *int              `json:"optional,omitempty"`
	Name     string            `json:"name"`
}

func TestNewTool_outputSchema(t *testing.T) {
	var give mapOut
	tool := connectors.NewTool(connectors.Spec{Name: "demo_out", Title: "Out"},
		func(context.Context, mcpgate.Secret, listIn) (mapOut, error) { return give, nil })
	if s := tool.OutputSchema; s == nil || s.Type != "object" || s.Properties["name"] == nil {
		t.Fatalf("OutputSchema = %+v, want an object schema inferred from the output type", s)
	}
	n := 3
	tests := []struct {
		name    string
		out     any
		wantErr bool
	}{
		// nil map and nil slice marshal as null: the schema must accept both.
		{name: "zero value", out: mapOut{}},
		{name: "filled", out: mapOut{Labels: map[string]string{"a": "b"}, Items: []string{"x"}, Optional: &n, Name: "n"}},
		{name: "wrong shape", out: map[string]any{"labels": 5, "items": nil, "name": "n"}, wantErr: true},
		{name: "unknown field", out: map[string]any{"labels": nil, "items": nil, "name": "n", "extra": 1}, wantErr: true},
		{name: "missing required", out: map[string]any{"labels": nil, "items": nil}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tool.ValidateOutput(tt.out); (err != nil) != tt.wantErr {
				t.Fatalf("ValidateOutput(%+v) err = %v, wantErr %v", tt.out, err, tt.wantErr)
			}
		})
	}
}

func TestNewTool_outputMustBeObject(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTool with a non-struct output did not panic")
		}
	}()
	connectors.NewTool(connectors.Spec{Name: "demo_bad"},
		func(context.Context, mcpgate.Secret, listIn) ([]string, error) { return nil, nil })
}

type portableIn struct {
	Flag *bool    `json:"flag,omitempty" jsonschema:"a flag"`
	Tags []string `json:"tags,omitempty"`
}

type portableOut struct {
	Items []string         `json:"items"`
	Meta  map[string]any   `json:"meta"`
	Next  *string          `json:"next"`
	Rows  []portableRow    `json:"rows"`
	ByKey map[string][]int `json:"by_key"`
}

type portableRow struct {
	Name  string `json:"name"`
	Extra *int   `json:"extra"`
}

// Schemas use one type per member, never ["null", X] (the MCP
// Inspector's --strict mode warned 33 times), and what could be null is
// left out: of results by MarshalOutput, of arguments by Decode.
func TestPortableNulls(t *testing.T) {
	tool := connectors.NewTool(connectors.Spec{Name: "portable"}, func(context.Context, mcpgate.Secret, portableIn) (portableOut, error) {
		return portableOut{Rows: []portableRow{{Name: "a"}}, ByKey: map[string][]int{"x": nil, "y": {1}}}, nil
	})
	for name, s := range map[string]*jsonschema.Schema{"input": tool.InputSchema, "output": tool.OutputSchema} {
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), `"null"`) {
			t.Errorf("%s schema has a null type: %s", name, b)
		}
	}
	out, err := tool.Call(context.Background(), "k", json.RawMessage(`{"flag":null,"tags":null}`))
	if err != nil {
		t.Fatalf("Call() with null arguments err = %v, want them taken as not given", err)
	}
	b, err := connectors.MarshalOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"rows":[{"name":"a"}],"by_key":{"y":[1]}}`; string(b) != want {
		t.Errorf("MarshalOutput() = %s, want %s", b, want)
	}
	if err := tool.ValidateOutput(out); err != nil {
		t.Errorf("ValidateOutput() err = %v", err)
	}
	if _, err := tool.Decode(json.RawMessage(`{"flag":"yes"}`)); err == nil {
		t.Error("Decode() of a string for a boolean succeeded")
	}
}
