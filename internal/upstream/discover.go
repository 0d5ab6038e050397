package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxPages bounds the pages of one list, against a server whose cursors
// never end.
const maxPages = 100

// Bounds on one tool definition a discovery accepts: a catalog is stored,
// shown on the dashboard and published to clients, and a definition this
// large is not a tool description but a payload.
const (
	MaxToolDefinitionBytes = 64 << 10
	MaxToolDescription     = 8 << 10 // characters
)

// Catalog is what an upstream declares: its own description, and the
// tools, prompts, resources and resource templates it lists, each as the
// upstream gave it.
type Catalog struct {
	ProtocolVersion string
	// Init is the initialize (or, on 2026-07-28, server/discover) result
	// as given: serverInfo, capabilities, instructions.
	Init  json.RawMessage
	Tools []Tool
	// Invalid are tool definitions the gateway refused to read (no name,
	// a member given twice, a name listed twice): never exposed, shown to
	// the admin.
	Invalid           []InvalidTool
	Prompts           []json.RawMessage
	Resources         []json.RawMessage
	ResourceTemplates []json.RawMessage
}

// InvalidTool is a definition Discover could not accept, and why.
type InvalidTool struct {
	Raw    json.RawMessage
	Reason string
}

// Discover connects to target on a session of its own, lists everything
// the server declares a capability for (every page) and closes the
// session. The pool's byte cap (MaxAnswerBytes) holds for the catalog as
// a whole, every page of every list counted against one budget, and the
// whole to its connect timeout. It opens a fresh session so that nothing the SDK
// caches answers in place of the server.
func (p *Pool[K]) Discover(ctx context.Context, target Target) (*Catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	s, err := p.connect(ctx, target)
	if err != nil {
		return nil, err
	}
	defer s.closeWithin(ctx)
	init := s.cs.InitializeResult()
	c := &Catalog{ProtocolVersion: init.ProtocolVersion, Init: s.init}
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	lim := p.limits
	lim.CallTimeout = p.opts.ConnectTimeout
	left := &catalogBudget{total: p.limits.MaxAnswerBytes, remaining: p.limits.MaxAnswerBytes}
	list := func(method, field string, send func(context.Context, string) error) ([]json.RawMessage, error) {
		return s.listAll(ctx, method, field, lim, left, send)
	}
	if caps.Tools != nil {
		raws, err := list("tools/list", "tools", func(ctx context.Context, cursor string) error {
			_, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			return err
		})
		if err != nil {
			return nil, err
		}
		c.Tools, c.Invalid = parseTools(raws)
	}
	if caps.Prompts != nil {
		if c.Prompts, err = list("prompts/list", "prompts", func(ctx context.Context, cursor string) error {
			_, err := s.cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			return err
		}); err != nil {
			return nil, err
		}
	}
	if caps.Resources != nil {
		if c.Resources, err = list("resources/list", "resources", func(ctx context.Context, cursor string) error {
			_, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			return err
		}); err != nil {
			return nil, err
		}
		if c.ResourceTemplates, err = list("resources/templates/list", "resourceTemplates", func(ctx context.Context, cursor string) error {
			_, err := s.cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			return err
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// catalogBudget is the bytes a discovery may still read, across its lists
// and pages: a cap per request alone lets a server send maxPages of them
// for each list.
type catalogBudget struct {
	total, remaining int64
}

func (b *catalogBudget) exceeded(s *session) error {
	return s.redact.newError(KindTooLarge, nil, "the server's catalog (every list and page) is larger than %d bytes", b.total)
}

// listAll pages through one list method, reading the raw answers, each
// held to what is left of the catalog's budget.
func (s *session) listAll(ctx context.Context, method, field string, lim Limits, left *catalogBudget, send func(context.Context, string) error) ([]json.RawMessage, error) {
	var items []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		if left.remaining <= 0 {
			return nil, left.exceeded(s)
		}
		lim.MaxAnswerBytes = left.remaining
		raw, err := s.request(ctx, method, lim, func(ctx context.Context) error { return send(ctx, cursor) })
		var e *Error
		if errors.As(err, &e) && e.Kind == KindTooLarge {
			return nil, left.exceeded(s)
		}
		if err != nil {
			return nil, err
		}
		if left.remaining -= int64(len(raw)); left.remaining < 0 {
			return nil, left.exceeded(s)
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the server's %s answer is not a JSON object", method)}
		}
		var got []json.RawMessage
		if err := json.Unmarshal(page[field], &got); err != nil && page[field] != nil {
			return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the server's %s answer has no %s list", method, field)}
		}
		items = append(items, got...)
		var next string
		_ = json.Unmarshal(page["nextCursor"], &next)
		if next == "" {
			return items, nil
		}
		if seen[next] {
			return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the server's %s cursors go round in a circle", method)}
		}
		seen[next] = true
		cursor = next
	}
	return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the server's %s has more than %d pages", method, maxPages)}
}

// parseTools reads each definition, keeping the first of a name listed
// twice and refusing the rest.
func parseTools(raws []json.RawMessage) ([]Tool, []InvalidTool) {
	var tools []Tool
	var invalid []InvalidTool
	seen := map[string]bool{}
	for _, raw := range raws {
		t, err := ParseTool(raw)
		switch {
		case err == nil && len(raw) > MaxToolDefinitionBytes:
			invalid = append(invalid, InvalidTool{Raw: raw, Reason: fmt.Sprintf("the definition of %q is larger than %d bytes", t.Name, MaxToolDefinitionBytes)})
		case err == nil && utf8.RuneCountInString(t.Description) > MaxToolDescription:
			invalid = append(invalid, InvalidTool{Raw: raw, Reason: fmt.Sprintf("the description of %q is longer than %d characters", t.Name, MaxToolDescription)})
		case err != nil:
			invalid = append(invalid, InvalidTool{Raw: raw, Reason: err.Error()})
		case seen[t.Name]:
			invalid = append(invalid, InvalidTool{Raw: raw, Reason: "the tool name is listed twice"})
		default:
			seen[t.Name] = true
			tools = append(tools, t)
		}
	}
	return tools, invalid
}
