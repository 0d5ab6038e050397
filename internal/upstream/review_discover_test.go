package upstream

import (
	"encoding/json"
	"testing"
)

// Review proof (low): the pin's canonical form writes numbers as float64
// (RFC 8785), so two schemas that an arbitrary-precision validator (Python's
// jsonschema, Postgres numeric) reads differently pin alike: a maximum
// moved from 2^53+1 to 2^53 is no change to the pin.
func TestReview_PinSeesEveryNumber(t *testing.T) {
	a, err := ParseTool(json.RawMessage(`{"name":"pay","inputSchema":{"type":"object","properties":{"cents":{"type":"integer","maximum":9007199254740993}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseTool(json.RawMessage(`{"name":"pay","inputSchema":{"type":"object","properties":{"cents":{"type":"integer","maximum":9007199254740992}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := Pin(a)
	pb, _ := Pin(b)
	if pa == pb {
		t.Errorf("Pin() is %s for both maxima 9007199254740993 and 9007199254740992", pa)
	}
}
