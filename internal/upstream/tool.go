package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Tool is one tool as an upstream declared it. Raw is the definition exactly
// as the upstream gave it (members the gateway does not know included), and
// is what the gateway publishes; the other fields are read from it.
type Tool struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil when the tool declares none
	Annotations  Annotations
	Raw          json.RawMessage
}

// Annotations are a tool's declared hints. Each hint is nil when the
// upstream did not declare it (or declared something other than a JSON
// boolean), which is not the same as false: an unset destructiveHint means
// destructive. The methods give the value the MCP specification defaults
// to. They are hints from a server the gateway does not trust: they may set
// defaults, never loosen a policy.
type Annotations struct {
	Title       string
	ReadOnly    *bool
	Destructive *bool
	Idempotent  *bool
	OpenWorld   *bool
	// Raw is the annotations object as given, nil when there was none.
	Raw json.RawMessage
}

// ReadOnlyHint is readOnlyHint, false unless declared.
func (a Annotations) ReadOnlyHint() bool { return hintOr(a.ReadOnly, false) }

// DestructiveHint is destructiveHint, true unless declared.
func (a Annotations) DestructiveHint() bool { return hintOr(a.Destructive, true) }

// IdempotentHint is idempotentHint, false unless declared.
func (a Annotations) IdempotentHint() bool { return hintOr(a.Idempotent, false) }

// OpenWorldHint is openWorldHint, true unless declared.
func (a Annotations) OpenWorldHint() bool { return hintOr(a.OpenWorld, true) }

func hintOr(h *bool, def bool) bool {
	if h == nil {
		return def
	}
	return *h
}

// toolNamePattern is the MCP specification's tool name: 1 to 128 of
// A-Z, a-z, 0-9, "_", "-" and ".". A name is a stored key, a URL path
// segment of the dashboard and API, and text shown to admins, so anything
// else (a "/", "#", control or bidi characters, a 60 KiB name) is refused.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidateToolName refuses a name outside the specification's pattern, and
// "." and "..", which a URL resolves as path segments.
func ValidateToolName(name string) error {
	if !toolNamePattern.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("the tool name %q must be 1-128 characters of letters, digits, '_', '-' or '.'", cutName(name))
	}
	return nil
}

// cutName shortens a refused name for the message that names it.
func cutName(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// ParseTool reads one tool definition from a tools/list answer. It refuses
// a definition that is not a JSON object, holds a member twice (parsers
// disagree on which one wins, so a reviewer and a client could see two
// different tools) or has no valid name (ValidateToolName).
func ParseTool(raw json.RawMessage) (Tool, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return Tool{}, err
	}
	if err := exactNumbers(raw); err != nil {
		return Tool{}, err
	}
	t := Tool{Raw: slices.Clone(raw)}
	if err := json.Unmarshal(members["name"], &t.Name); err != nil || t.Name == "" {
		return Tool{}, errors.New("tool has no name")
	}
	if err := ValidateToolName(t.Name); err != nil {
		return Tool{}, err
	}
	_ = json.Unmarshal(members["title"], &t.Title)
	_ = json.Unmarshal(members["description"], &t.Description)
	t.InputSchema = present(members["inputSchema"])
	t.OutputSchema = present(members["outputSchema"])
	if a := present(members["annotations"]); a != nil {
		t.Annotations, err = parseAnnotations(a)
		if err != nil {
			return Tool{}, fmt.Errorf("tool %q: %w", t.Name, err)
		}
	}
	return t, nil
}

func parseAnnotations(raw json.RawMessage) (Annotations, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return Annotations{}, fmt.Errorf("annotations: %w", err)
	}
	a := Annotations{Raw: slices.Clone(raw)}
	_ = json.Unmarshal(members["title"], &a.Title)
	a.ReadOnly = boolHint(members["readOnlyHint"])
	a.Destructive = boolHint(members["destructiveHint"])
	a.Idempotent = boolHint(members["idempotentHint"])
	a.OpenWorld = boolHint(members["openWorldHint"])
	return a, nil
}

// boolHint is a declared JSON boolean, or nil: a hint given as "true" (a
// string) or 1 is not a declaration the gateway believes.
func boolHint(raw json.RawMessage) *bool {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		v := true
		return &v
	case "false":
		v := false
		return &v
	}
	return nil
}

// present returns raw, or nil when it is absent or JSON null.
func present(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return slices.Clone(raw)
}

// exactNumbers refuses a definition holding a number that float64 cannot
// carry: the pin's canonical form (RFC 8785) writes numbers as float64, so
// 9007199254740993 and 9007199254740992 would pin alike, while a validator
// with exact numbers (Python's jsonschema, Postgres numeric) reads two
// different schemas. A number passes when its value is that of the
// shortest spelling of the nearest float64 (0.1 passes; 2^53+1 and 1e400
// do not).
func exactNumbers(raw json.RawMessage) error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New("not valid JSON")
		}
		if tok.Kind() != '0' {
			continue
		}
		if lit := tok.String(); !float64Exact(lit) {
			return fmt.Errorf("the number %s cannot be read exactly as a 64-bit float", cutName(lit))
		}
	}
}

func float64Exact(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	if f == 0 {
		// Zero, or an underflow: exact only if every digit is 0. (No
		// big.Rat here: its cost grows with the exponent's size.)
		mantissa, _, _ := strings.Cut(strings.ToLower(lit), "e")
		return strings.Trim(mantissa, "-+.0") == ""
	}
	// f is finite and non-zero, so the literal's exponent is bounded by
	// float64's range plus its own length.
	want, ok := new(big.Rat).SetString(lit)
	got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok && ok2 && want.Cmp(got) == 0
}

// objectMembers splits a JSON object into its members, refusing anything
// else and any name given twice.
func objectMembers(raw json.RawMessage) (map[string]json.RawMessage, error) {
	// Canonicalize refuses invalid JSON, invalid UTF-8 and a name given
	// twice in any object (RFC 7493), which json.Unmarshal would accept.
	if check := jsontext.Value(slices.Clone(raw)); check.Canonicalize() != nil {
		return nil, errors.New("not valid JSON, or a member is given twice")
	}
	if k := jsontext.Value(bytes.TrimSpace(raw)).Kind(); k != '{' {
		return nil, errors.New("not a JSON object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, err
	}
	return members, nil
}

// PinVersion names the canonical form Pin hashes. A change to the form is
// a new version, so stored pins of the old one are recognised as such (and
// match no new pin: a tool trusted under v1 is quarantined for review).
const PinVersion = "v2"

// Pin returns the pin of t's definition: "v2:" and the hex SHA-256 of its
// canonical form. The canonical form (version 2) is the whole definition
// as the upstream gave it, every member included (_meta, icons, execution
// and members the gateway does not know: clients act on them), a
// top-level member that is null left out as if absent, written as RFC 8785
// (JSON Canonicalization Scheme): members sorted by their UTF-16 code
// units at every depth, no whitespace, numbers in their shortest
// ECMAScript form and strings minimally escaped. So key order, whitespace
// and number spelling change no pin; any change to a value does.
func Pin(t Tool) (string, error) {
	canon, err := canonicalDefinition(t.Raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return PinVersion + ":" + hex.EncodeToString(sum[:]), nil
}

// canonicalDefinition writes the canonical form Pin documents.
func canonicalDefinition(raw json.RawMessage) ([]byte, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for _, name := range slices.Sorted(maps.Keys(members)) {
		v := present(members[name])
		if v == nil {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	canon := jsontext.Value(b.Bytes())
	if err := canon.Canonicalize(); err != nil {
		return nil, err
	}
	return canon, nil
}

// CatalogDiff is what changed between two tool catalogs of one server.
type CatalogDiff struct {
	Added   []string     // tools only in the new catalog
	Removed []string     // tools only in the old catalog
	Changed []ToolChange // tools in both whose pinned definition differs
	// Loosened lists every hint of a changed tool that now claims less
	// risk than before; each always needs an admin, whatever else changed.
	Loosened []HintChange
}

// Empty reports whether nothing changed.
func (d CatalogDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}

// ToolChange names the members of one tool whose value changed.
type ToolChange struct {
	Tool   string
	Fields []string // the changed members' names (title, description, _meta, ...), sorted
}

// HintChange is one hint of a tool that became less restrictive, with the
// declared values before and after (nil: not declared).
type HintChange struct {
	Tool   string
	Hint   string // readOnlyHint, destructiveHint, idempotentHint or openWorldHint
	Before *bool
	After  *bool
}

// hintRule is a hint with the value that restricts most once the spec's
// default is applied: a change away from it is a loosening.
type hintRule struct {
	name     string
	get      func(Annotations) *bool
	value    func(Annotations) bool
	cautious bool
}

var hintRules = []hintRule{
	{"readOnlyHint", func(a Annotations) *bool { return a.ReadOnly }, Annotations.ReadOnlyHint, false},
	{"destructiveHint", func(a Annotations) *bool { return a.Destructive }, Annotations.DestructiveHint, true},
	{"idempotentHint", func(a Annotations) *bool { return a.Idempotent }, Annotations.IdempotentHint, false},
	{"openWorldHint", func(a Annotations) *bool { return a.OpenWorld }, Annotations.OpenWorldHint, true},
}

// DiffCatalogs compares an old catalog with a new one, tool by tool (by
// name), member by member of what Pin covers. Names are sorted in the
// answer.
func DiffCatalogs(old, new []Tool) (CatalogDiff, error) {
	before := map[string]Tool{}
	for _, t := range old {
		before[t.Name] = t
	}
	after := map[string]Tool{}
	for _, t := range new {
		after[t.Name] = t
	}
	var d CatalogDiff
	for name := range before {
		if _, ok := after[name]; !ok {
			d.Removed = append(d.Removed, name)
		}
	}
	for name, t := range after {
		prev, ok := before[name]
		if !ok {
			d.Added = append(d.Added, name)
			continue
		}
		fields, err := changedMembers(prev.Raw, t.Raw)
		if err != nil {
			return CatalogDiff{}, fmt.Errorf("tool %q: %w", name, err)
		}
		if len(fields) == 0 {
			continue
		}
		d.Changed = append(d.Changed, ToolChange{Tool: name, Fields: fields})
		d.Loosened = append(d.Loosened, loosenedHints(name, prev.Annotations, t.Annotations)...)
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	slices.SortFunc(d.Changed, func(a, b ToolChange) int { return compareStrings(a.Tool, b.Tool) })
	slices.SortStableFunc(d.Loosened, func(a, b HintChange) int { return compareStrings(a.Tool, b.Tool) })
	return d, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// changedMembers lists the members (all but name, which matched) whose
// canonical values differ, sorted; a member absent or null on one side
// and present on the other counts.
func changedMembers(oldRaw, newRaw json.RawMessage) ([]string, error) {
	a, err := objectMembers(oldRaw)
	if err != nil {
		return nil, err
	}
	b, err := objectMembers(newRaw)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	delete(names, "name")
	var fields []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		same, err := sameJSON(present(a[name]), present(b[name]))
		if err != nil {
			return nil, err
		}
		if !same {
			fields = append(fields, name)
		}
	}
	return fields, nil
}

func sameJSON(a, b json.RawMessage) (bool, error) {
	if a == nil || b == nil {
		return a == nil && b == nil, nil
	}
	ca, cb := jsontext.Value(slices.Clone(a)), jsontext.Value(slices.Clone(b))
	if err := ca.Canonicalize(); err != nil {
		return false, err
	}
	if err := cb.Canonicalize(); err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

func loosenedHints(tool string, before, after Annotations) []HintChange {
	var out []HintChange
	for _, r := range hintRules {
		if r.value(before) == r.cautious && r.value(after) != r.cautious {
			out = append(out, HintChange{Tool: tool, Hint: r.name, Before: r.get(before), After: r.get(after)})
		}
	}
	return out
}
