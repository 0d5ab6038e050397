package service_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
)

// padConnector is a second test-only connector: pads that live for a while.
// pads_end ends a pad and pads_extend is guarded: a shorter life than now
// follows pads_end's policy, and what it asks for meets the guardrails.
type padConnector struct {
	mu      sync.Mutex
	ended   int
	running int
	tools   []*connectors.Tool
}

type padIn struct {
	Pad      string `json:"pad" jsonschema:"the pad"`
	Seconds  int    `json:"seconds,omitempty" jsonschema:"new life"`
	Template string `json:"template,omitempty" jsonschema:"template"`
}

func newPadConnector() *padConnector {
	c := &padConnector{}
	guard := func(_ context.Context, _ mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
		as := connectors.Assessment{Lifetime: time.Duration(args["seconds"].(int64)) * time.Second, Starts: true}
		if tpl, _ := args["template"].(string); tpl != "" {
			as.Templates = []string{tpl}
		}
		if as.Lifetime < time.Minute {
			as.Follows, as.Reason = "pads_end", "A life under a minute ends the pad."
		}
		return as, nil
	}
	c.tools = []*connectors.Tool{
		connectors.NewTool(connectors.Spec{Name: "pads_end", Title: "End a pad", Description: "Ends a pad.",
			Annotations: connectors.Annotations{Destructive: true}, DefaultApproval: mcpgate.ApprovalHuman},
			func(_ context.Context, _ mcpgate.Secret, in padIn) (map[string]any, error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.ended++
				return map[string]any{"ended": in.Pad}, nil
			}),
		connectors.NewTool(connectors.Spec{Name: "pads_extend", Title: "Extend a pad", Description: "Sets a pad's life.",
			DefaultEnabled: true, CostsMoney: true, Guard: guard, Follows: "pads_end",
			Schema: func(s *jsonschema.Schema) { s.Properties["seconds"].Default = []byte("300") }},
			func(_ context.Context, _ mcpgate.Secret, in padIn) (map[string]any, error) {
				return map[string]any{"pad": in.Pad, "seconds": in.Seconds}, nil
			}),
	}
	return c
}

func (c *padConnector) Name() string                                          { return "pads" }
func (c *padConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *padConnector) CredentialHint(mcpgate.Secret) string                  { return "pads…" }
func (c *padConnector) Tools() []*connectors.Tool                             { return c.tools }
func (c *padConnector) Running(context.Context, mcpgate.Secret) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running, nil
}
func (c *padConnector) Describe(_ context.Context, _ mcpgate.Secret, tool string, args map[string]any) (string, error) {
	if tool == "pads_end" && args["pad"] == "gone" {
		return "", mcpgate.Errorf(mcpgate.ENotFound, "pad gone was not found")
	}
	if tool == "pads_end" {
		return "End pad " + args["pad"].(string) + ", which is blue.", nil
	}
	return "", nil
}

type padFixture struct {
	*svcFixture
	pads  *padConnector
	clock *e2bsim.ManualClock
}

func newPadFixture(t *testing.T) *padFixture {
	t.Helper()
	pads, clk := newPadConnector(), e2bsim.NewManualClock(time.Now())
	f := newSvcFixture(t, func(o *service.Options) {
		notes, _ := o.Registry.Connector("notes")
		o.Registry = connectors.NewRegistry(notes, pads)
		o.Now = clk.Now
	})
	if _, err := f.svc.Connections.PutConnection(context.Background(), f.owner, "pads", "pads-credential"); err != nil {
		t.Fatal(err)
	}
	return &padFixture{svcFixture: f, pads: pads, clock: clk}
}

// keyActor is a person's MCP key as the key authenticator makes it.
func (f *padFixture) keyActor(t *testing.T, person *mcpgate.Actor) *mcpgate.Actor {
	t.Helper()
	k, _, err := f.svc.Keys.CreateKey(context.Background(), person, mcpgate.NewKey{Name: "ai"})
	if err != nil {
		t.Fatal(err)
	}
	return &mcpgate.Actor{UserID: person.UserID, Email: person.Email, WorkspaceID: person.WorkspaceID, Scope: mcpgate.ScopeFull,
		KeyID: k.ID, Source: mcpgate.SourceMCP}
}

func (f *padFixture) enableEnd(t *testing.T, approval mcpgate.Approval) {
	t.Helper()
	on := true
	if _, err := f.svc.Tools.UpdateTool(context.Background(), f.owner, "pads_end", mcpgate.ToolUpdate{Enabled: &on, Approval: &approval}); err != nil {
		t.Fatal(err)
	}
}

// request calls pads_end as the key and returns the approval it got.
func (f *padFixture) request(t *testing.T, key *mcpgate.Actor, pad string) *mcpgate.ApprovalRequest {
	t.Helper()
	_, err := f.svc.Tools.CallTool(context.Background(), key, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"` + pad + `"}`)})
	var need *mcpgate.ApprovalRequiredError
	if !errors.As(err, &need) {
		t.Fatalf("CallTool(pads_end) err = %v, want an approval request", err)
	}
	return need.Approval
}

// extender calls pads_extend with the given arguments as a new MCP key of
// person.
func (f *padFixture) extender(t *testing.T, person *mcpgate.Actor) func(args string) error {
	t.Helper()
	key := f.keyActor(t, person)
	return func(args string) error {
		_, err := f.svc.Tools.CallTool(context.Background(), key, mcpgate.ToolCall{Tool: "pads_extend", Arguments: []byte(args)})
		return err
	}
}

func (f *padFixture) use(key *mcpgate.Actor, id, args string) error {
	_, err := f.svc.Tools.CallTool(context.Background(), key, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(args), ApprovalID: id})
	return err
}

// wantShutOut checks that who (described as name) can neither approve nor
// read ap, both refused with code, and lists no approval.
func (f *padFixture) wantShutOut(t *testing.T, name string, who *mcpgate.Actor, ap *mcpgate.ApprovalRequest, code mcpgate.Code) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.svc.Approvals.Approve(ctx, who, ap.ID); mcpgate.ErrorCode(err) != code {
		t.Errorf("%s approving: err = %v, want %s", name, err, code)
	}
	if _, err := f.svc.Approvals.Approval(ctx, who, ap.ID); mcpgate.ErrorCode(err) != code {
		t.Errorf("%s reading: err = %v, want %s", name, err, code)
	}
	if list, _ := f.svc.Approvals.Approvals(ctx, who, ""); len(list) != 0 {
		t.Errorf("%s lists %d approvals, want 0", name, len(list))
	}
}

func (f *padFixture) endedCount() int {
	f.pads.mu.Lock()
	defer f.pads.mu.Unlock()
	return f.pads.ended
}

func (f *padFixture) actions() []string {
	var out []string
	for _, ev := range f.audit.Events() {
		out = append(out, ev.Action)
	}
	return out
}

// newHumanRequest is a pad fixture whose pads_end a person approves, with
// the pending approval that requester's new MCP key got asking to end p1.
func newHumanRequest(t *testing.T, requester func(*padFixture) *mcpgate.Actor) (*padFixture, *mcpgate.Actor, *mcpgate.ApprovalRequest) {
	t.Helper()
	f := newPadFixture(t)
	f.enableEnd(t, mcpgate.ApprovalHuman)
	key := f.keyActor(t, requester(f))
	return f, key, f.request(t, key, "p1")
}

func TestApproval_HumanFlow(t *testing.T) {
	f, memberKey, ap := newHumanRequest(t, func(f *padFixture) *mcpgate.Actor { return f.member })
	ctx := context.Background()
	if f.endedCount() != 0 {
		t.Fatal("the first call ran the tool")
	}
	if ap.State != mcpgate.ApprovalPending || ap.Summary != "End pad p1, which is blue." || ap.RequestedBy != f.member.UserID ||
		ap.URL != "http://gw.test/app/w/"+f.ws+"/approvals/"+ap.ID || ap.ExpiresAt.Sub(f.clock.Now()) > mcpgate.ApprovalTTL {
		t.Fatalf("approval = %+v", ap)
	}
	if n, _ := f.svc.Approvals.PendingApprovals(ctx, f.member); n != 1 {
		t.Errorf("member's pending count = %d, want 1", n)
	}
	if n, _ := f.svc.Approvals.PendingApprovals(ctx, f.admin); n != 1 {
		t.Errorf("admin's pending count = %d, want 1", n)
	}
	if err := f.use(memberKey, ap.ID, `{"pad":"p1"}`); !strings.Contains(mcpgate.ErrorMessage(err), "nobody has approved this yet") {
		t.Errorf("use before approval err = %v", err)
	}

	// Nobody but a signed-in person who asked, or an admin, decides; the
	// key that asked never can.
	if _, err := f.svc.Approvals.Approve(ctx, memberKey, ap.ID); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("the key approving its own call: err = %v, want forbidden", err)
	}
	f.wantShutOut(t, "another workspace's owner", f.outside, ap, mcpgate.ENotFound)
	got, err := f.svc.Approvals.Approve(ctx, f.member, ap.ID)
	if err != nil || got.State != mcpgate.ApprovalApproved || got.DecidedBy != f.member.UserID {
		t.Fatalf("Approve() by the requester = %+v, %v", got, err)
	}
	if _, err := f.svc.Approvals.Deny(ctx, f.admin, ap.ID); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Errorf("deny after approval: err = %v, want conflict", err)
	}

	// Only the same key, tool and arguments; then once.
	otherKey := f.keyActor(t, f.member)
	if err := f.use(otherKey, ap.ID, `{"pad":"p1"}`); !strings.Contains(mcpgate.ErrorMessage(err), "different call") {
		t.Errorf("use by another key of the same user: err = %v", err)
	}
	if err := f.use(memberKey, ap.ID, `{"pad":"p2"}`); !strings.Contains(mcpgate.ErrorMessage(err), "different call") {
		t.Errorf("use with other arguments: err = %v", err)
	}
	if f.endedCount() != 0 {
		t.Fatal("a mismatched call ran")
	}
	if err := f.use(memberKey, ap.ID, `{"pad":"p1"}`); err != nil {
		t.Fatalf("use of the approval err = %v", err)
	}
	if f.endedCount() != 1 {
		t.Fatalf("ended = %d, want 1", f.endedCount())
	}
	if err := f.use(memberKey, ap.ID, `{"pad":"p1"}`); !strings.Contains(mcpgate.ErrorMessage(err), "already used") {
		t.Errorf("replay err = %v", err)
	}
	if err := f.use(memberKey, "00000000-0000-0000-0000-000000000000", `{"pad":"p1"}`); !strings.Contains(mcpgate.ErrorMessage(err), "no approval") {
		t.Errorf("unknown id err = %v", err)
	}
	if f.endedCount() != 1 {
		t.Fatalf("ended = %d after replays, want 1", f.endedCount())
	}
	want := []string{"approval.requested", "approval.approved", "pads_end", "approval.used"}
	for _, w := range want {
		if !strings.Contains(strings.Join(f.actions(), " "), w) {
			t.Errorf("audit %v lacks %s", f.actions(), w)
		}
	}
	for _, ev := range f.audit.Events() {
		if ev.Action == "approval.approved" && (ev.ActorID != f.member.UserID || ev.Arguments["approval"] != ap.ID) {
			t.Errorf("approval.approved = %+v, want by the member, naming the approval", ev)
		}
	}
}

func TestApproval_WhoDecides(t *testing.T) {
	f, ownerKey, ap := newHumanRequest(t, func(f *padFixture) *mcpgate.Actor { return f.owner })
	ctx := context.Background()
	f.wantShutOut(t, "a plain member, of the owner's request,", f.member, ap, mcpgate.EForbidden)
	if _, err := f.svc.Approvals.Approve(ctx, f.admin, ap.ID); err != nil {
		t.Fatalf("an admin approving: err = %v", err)
	}

	// Denied: refused with its own message, and it never runs.
	ap2 := f.request(t, ownerKey, "p2")
	if _, err := f.svc.Approvals.Deny(ctx, f.admin, ap2.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.use(ownerKey, ap2.ID, `{"pad":"p2"}`); !strings.Contains(mcpgate.ErrorMessage(err), "admin@example.com denied") {
		t.Errorf("use of a denied approval: err = %v", err)
	}
	// Expired: refused with its own message; deciding it is refused too,
	// and the expiry is audited once.
	ap3 := f.request(t, ownerKey, "p3")
	ap4 := f.request(t, ownerKey, "p4")
	if _, err := f.svc.Approvals.Approve(ctx, f.owner, ap4.ID); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(mcpgate.ApprovalTTL + time.Second)
	if _, err := f.svc.Approvals.Approve(ctx, f.owner, ap3.ID); !strings.Contains(mcpgate.ErrorMessage(err), "expired") {
		t.Errorf("approving an expired request: err = %v", err)
	}
	if err := f.use(ownerKey, ap4.ID, `{"pad":"p4"}`); !strings.Contains(mcpgate.ErrorMessage(err), "expired") {
		t.Errorf("use of an expired approval: err = %v", err)
	}
	// p1 was approved and never used: expired as well.
	if list, _ := f.svc.Approvals.Approvals(ctx, f.owner, mcpgate.ApprovalExpired); len(list) != 3 {
		t.Errorf("expired list has %d, want 3", len(list))
	}
	if f.endedCount() != 0 {
		t.Fatalf("ended = %d, want 0", f.endedCount())
	}
	n := 0
	for _, a := range f.actions() {
		if a == "approval.expired" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("approval.expired audited %d times, want 2 (once each)", n)
	}
	// The sweep audits the one nobody touched (p1, approved, never used),
	// once, and none of the others again.
	for range 2 {
		if err := f.svc.Approvals.ExpireApprovals(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n = 0
	for _, ev := range f.audit.Events() {
		if ev.Action == "approval.expired" {
			n++
			if ev.Arguments["approval"] == ap.ID && ev.ActorID != "" {
				t.Errorf("the sweep's event has actor %q, want none", ev.ActorID)
			}
		}
	}
	if n != 3 {
		t.Errorf("approval.expired audited %d times after the sweep, want 3", n)
	}
	// After the retention the rows go; the audit log keeps the record.
	f.clock.Advance(31 * 24 * time.Hour)
	if err := f.svc.Approvals.ExpireApprovals(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.svc.Approvals.Approvals(ctx, f.owner, ""); len(list) != 0 {
		t.Errorf("%d approvals kept past the retention, want 0", len(list))
	}
	// A thing that does not exist is refused, not sent to a person.
	_, err := f.svc.Tools.CallTool(ctx, ownerKey, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"gone"}`)})
	if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("approval for a missing pad: err = %v, want not found", err)
	}
}

// TestApproval_UsedOnce: many concurrent calls with one approval (as from
// several replicas) run the tool exactly once.
// TestApproval_OAuthGrant: a connected app (an OAuth grant) asks for a
// person's approval like an MCP key does, and the approval is bound to that
// grant: the same person's MCP key, or another grant of theirs, cannot spend
// it; the grant that asked runs the call once.
func TestApproval_OAuthGrant(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	f.enableEnd(t, mcpgate.ApprovalHuman)
	grantActor := func(id string) *mcpgate.Actor {
		return &mcpgate.Actor{UserID: f.member.UserID, Email: f.member.Email, WorkspaceID: f.ws, Scope: mcpgate.ScopeFull,
			GrantID: id, ClientName: "Claude", Source: mcpgate.SourceMCP}
	}
	app, otherApp, memberKey := grantActor("5f0c3c4e-6a43-4c1e-9a64-0c1b3c2d7e11"), grantActor("9d6a2f7e-3b1c-4e8a-8f2d-4a5b6c7d8e9f"),
		f.keyActor(t, f.member)

	ap := f.request(t, app, "p1")
	if ap.GrantID != app.GrantID || ap.KeyID != "" || ap.State != mcpgate.ApprovalPending {
		t.Fatalf("approval = %+v, want pending and bound to the grant", ap)
	}
	if _, err := f.svc.Approvals.Approve(ctx, app, ap.ID); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("the app approving its own call: err = %v, want forbidden", err)
	}
	if _, err := f.svc.Approvals.Approve(ctx, f.member, ap.ID); err != nil {
		t.Fatalf("Approve() err = %v", err)
	}
	for name, other := range map[string]*mcpgate.Actor{"the same person's MCP key": memberKey, "another grant": otherApp} {
		if err := f.use(other, ap.ID, `{"pad":"p1"}`); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
			t.Errorf("%s spending the app's approval: err = %v, want forbidden", name, err)
		}
	}
	if f.endedCount() != 0 {
		t.Fatal("a mismatched credential ran the tool")
	}
	if err := f.use(app, ap.ID, `{"pad":"p1"}`); err != nil {
		t.Fatalf("the app spending its approval: err = %v", err)
	}
	if err := f.use(app, ap.ID, `{"pad":"p1"}`); err == nil {
		t.Error("the approval ran twice")
	}
	if f.endedCount() != 1 {
		t.Errorf("pads ended = %d, want 1", f.endedCount())
	}
}

func TestApproval_UsedOnce(t *testing.T) {
	f, key, ap := newHumanRequest(t, func(f *padFixture) *mcpgate.Actor { return f.owner })
	if _, err := f.svc.Approvals.Approve(context.Background(), f.owner, ap.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.use(key, ap.ID, `{"pad":"p1"}`) == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || f.endedCount() != 1 {
		t.Fatalf("%d calls succeeded and the tool ran %d times, want 1 and 1", ok.Load(), f.endedCount())
	}
}

// TestApproval_PersonInDashboard: a person calling from the dashboard is
// the human; their confirmation suffices and no approval is stored.
func TestApproval_PersonInDashboard(t *testing.T) {
	f := newPadFixture(t)
	f.enableEnd(t, mcpgate.ApprovalHuman)
	ctx := context.Background()
	_, err := f.svc.Tools.CallTool(ctx, f.member, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"p1"}`)})
	if c := (*mcpgate.ConfirmationRequiredError)(nil); !errors.As(err, &c) {
		t.Fatalf("unconfirmed dashboard call err = %v, want a confirmation", err)
	}
	if _, err := f.svc.Tools.CallTool(ctx, f.member, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"p1"}`), Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	// A key's Confirmed (what the MCP endpoint sets after a model-mode
	// confirmation) is no person.
	key := f.keyActor(t, f.member)
	_, err = f.svc.Tools.CallTool(ctx, key, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"p2"}`), Confirmed: true})
	if need := (*mcpgate.ApprovalRequiredError)(nil); !errors.As(err, &need) {
		t.Fatalf("confirmed key call err = %v, want an approval request", err)
	}
	if f.endedCount() != 1 {
		t.Fatalf("ended = %d, want 1", f.endedCount())
	}
}

// TestApproval_Follows: a call that does what a disabled tool does is
// refused, saying who can enable it; once enabled it meets that tool's
// approval.
func TestApproval_Follows(t *testing.T) {
	f := newPadFixture(t)
	call := f.extender(t, f.member)
	err := call(`{"pad":"p1","seconds":30}`)
	if msg := mcpgate.ErrorMessage(err); mcpgate.ErrorCode(err) != mcpgate.EForbidden || !strings.Contains(msg, "pads_end, which is turned off") ||
		!strings.Contains(msg, "owner or admin") || !strings.Contains(msg, "A life under a minute ends the pad.") {
		t.Errorf("shortening while pads_end is off: err = %v", err)
	}
	if err := call(`{"pad":"p1","seconds":600}`); err != nil {
		t.Errorf("a longer life: err = %v", err)
	}
	f.enableEnd(t, mcpgate.ApprovalHuman)
	if need := (*mcpgate.ApprovalRequiredError)(nil); !errors.As(call(`{"pad":"p1","seconds":30}`), &need) {
		t.Errorf("shortening while pads_end is human: want an approval request")
	}
	f.enableEnd(t, mcpgate.ApprovalModel)
	if c := (*mcpgate.ConfirmationRequiredError)(nil); !errors.As(call(`{"pad":"p1","seconds":30}`), &c) ||
		!strings.Contains(c.Summary, "A life under a minute") {
		t.Errorf("shortening while pads_end is model: want a confirmation that says why")
	}
}

func TestGuardrails(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	call := f.extender(t, f.member)
	// Defaults: no limits.
	f.pads.running = 1000
	if err := call(`{"pad":"p","seconds":86400,"template":"anything"}`); err != nil {
		t.Fatalf("no guardrails: err = %v", err)
	}
	if _, err := f.svc.Tools.SetGuardrails(ctx, f.member, mcpgate.Guardrails{MaxRunning: 1}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("member setting guardrails: err = %v, want forbidden", err)
	}
	if _, err := f.svc.Tools.SetGuardrails(ctx, f.admin, mcpgate.Guardrails{MaxTimeoutSeconds: -1}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("negative limit: err = %v, want invalid", err)
	}
	g, err := f.svc.Tools.SetGuardrails(ctx, f.admin, mcpgate.Guardrails{MaxTimeoutSeconds: 3600, MaxRunning: 3,
		AllowedTemplates: []string{" base ", "base", "python"}})
	if err != nil || len(g.AllowedTemplates) != 2 {
		t.Fatalf("SetGuardrails() = %+v, %v", g, err)
	}
	if got, _ := f.svc.Tools.Guardrails(ctx, f.member); got.MaxRunning != 3 || got.MaxTimeoutSeconds != 3600 {
		t.Errorf("Guardrails() as member = %+v", got)
	}
	if got, _ := f.svc.Tools.Guardrails(ctx, f.outside); got.MaxRunning != 0 {
		t.Errorf("another workspace's guardrails = %+v, want none", got)
	}
	f.pads.running = 2
	tests := []struct {
		name, args, want string
	}{
		{"timeout over the limit", `{"pad":"p","seconds":3601,"template":"base"}`, "at most 3600 seconds"},
		{"template not allowed", `{"pad":"p","seconds":60,"template":"node"}`, "allows only these templates: base, python"},
		{"within limits", `{"pad":"p","seconds":3600,"template":"python"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := call(tt.args)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if mcpgate.ErrorCode(err) != mcpgate.EForbidden || !strings.Contains(mcpgate.ErrorMessage(err), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	f.pads.running = 3
	if err := call(`{"pad":"p","seconds":60,"template":"base"}`); !strings.Contains(mcpgate.ErrorMessage(err), "3 are running") {
		t.Errorf("at the running limit: err = %v", err)
	}
	refusals := 0
	for _, ev := range f.audit.Events() {
		if ev.Action == string(mcpgate.ActionGuardrailRefused) && ev.Outcome == mcpgate.OutcomeDenied && ev.Arguments["tool"] == "pads_extend" {
			refusals++
		}
	}
	if refusals != 3 {
		t.Errorf("guardrail refusals audited = %d, want 3", refusals)
	}
}

func TestUpdateTool_Approval(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	infos, _ := f.svc.Tools.Tools(ctx, f.owner)
	for _, info := range infos {
		if info.Name == "pads_end" && info.Approval != mcpgate.ApprovalHuman {
			t.Fatalf("default = %+v, want human", info)
		}
	}
	// Each mode in turn; an update without one keeps it.
	enabled := true
	for _, step := range []struct {
		u    mcpgate.ToolUpdate
		want mcpgate.Approval
	}{
		{mcpgate.ToolUpdate{Approval: new(mcpgate.ApprovalModel)}, mcpgate.ApprovalModel},
		{mcpgate.ToolUpdate{Approval: new(mcpgate.ApprovalNone)}, mcpgate.ApprovalNone},
		{mcpgate.ToolUpdate{Approval: new(mcpgate.ApprovalHuman)}, mcpgate.ApprovalHuman},
		{mcpgate.ToolUpdate{Enabled: &enabled}, mcpgate.ApprovalHuman},
	} {
		got, err := f.svc.Tools.UpdateTool(ctx, f.admin, "pads_end", step.u)
		if err != nil || got.Approval != step.want {
			t.Fatalf("UpdateTool(%+v) = %v, %v; want %s", step.u, got, err, step.want)
		}
	}
	bad := mcpgate.Approval("maybe")
	if _, err := f.svc.Tools.UpdateTool(ctx, f.admin, "pads_end", mcpgate.ToolUpdate{Approval: &bad}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("unknown approval: err = %v", err)
	}
}

// A call that continues an approved call (a retry answering an upstream
// tool's input requests) runs under the approval its first call used up,
// and only then: not under one that is still pending or only approved
// (unused), another key's, or one for other arguments; each refusal runs
// nothing.
func TestApproval_ContinuesApproval(t *testing.T) {
	f, key, ap := newHumanRequest(t, func(f *padFixture) *mcpgate.Actor { return f.member })
	ctx := context.Background()
	cont := func(who *mcpgate.Actor, args string) error {
		_, err := f.svc.Tools.CallTool(ctx, who, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(args), ContinuesApproval: ap.ID})
		return err
	}
	const p1 = `{"pad":"p1"}`
	if err := cont(key, p1); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("continuing a pending approval: err = %v, want forbidden", err)
	}
	if _, err := f.svc.Approvals.Approve(ctx, f.owner, ap.ID); err != nil {
		t.Fatal(err)
	}
	if err := cont(key, p1); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("continuing an approval not used yet: err = %v, want forbidden", err)
	}
	if f.endedCount() != 0 {
		t.Fatal("a refused continuation ran the tool")
	}
	if err := f.use(key, ap.ID, p1); err != nil {
		t.Fatalf("the approved call: %v", err)
	}
	if err := cont(key, p1); err != nil {
		t.Fatalf("continuing the used approval: %v", err)
	}
	if n := f.endedCount(); n != 2 {
		t.Errorf("the tool ran %d times, want 2 (the call and its continuation)", n)
	}
	if err := cont(f.keyActor(t, f.member), p1); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("another key continuing it: err = %v, want forbidden", err)
	}
	if err := cont(key, `{"pad":"p2"}`); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("continuing it with other arguments: err = %v, want forbidden", err)
	}
	if n := f.endedCount(); n != 2 {
		t.Errorf("the tool ran %d times after the refusals, want 2", n)
	}
}
