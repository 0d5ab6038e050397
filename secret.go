package mcpgate

import "log/slog"

// Secret holds a credential in plain text for the length of one request. It
// renders as "[redacted]" through fmt, slog and encoding/json, so a secret
// that slips into a log line or a response shows nothing. Reveal returns the
// value and is the one place a reviewer needs to look for.
type Secret string

const redacted = "[redacted]"

// Reveal returns the plain-text value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string { return redacted }

// GoString implements fmt.GoStringer, so %#v redacts too.
func (s Secret) GoString() string { return redacted }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
