package upstream

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateServerName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"github", true}, {"my-server", true}, {"a", true}, {"x1-2-3", true}, {strings.Repeat("a", 16), true},
		{strings.Repeat("a", 17), false}, {"", false}, {"-a", false}, {"a-", false}, {"a--b", false},
		{"A", false}, {"a_b", false}, {"a.b", false}, {"é", false},
	} {
		if err := ValidateServerName(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidateServerName(%q) err = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestExposeNames(t *testing.T) {
	long := strings.Repeat("t", NameBudget) // "gh_" + 48 characters passes the budget
	servers := []ServerTools{
		{Server: "gh", Tools: []string{"search", "Search", long, "has space", "list", "create_issue"}},
		{Server: "jira", Tools: []string{"search", "sandbox_create", "get"}},
	}
	reserved := []string{"jira_sandbox_create"}
	aliases := map[Route]string{
		{Server: "gh", Tool: long}:               "gh_long",
		{Server: "gh", Tool: "has space"}:        "gh_list", // taken by a generated name
		{Server: "jira", Tool: "get"}:            "bad alias!",
		{Server: "gone", Tool: "x"}:              "ignored",
		{Server: "jira", Tool: "sandbox_create"}: "jira_sbx",
	}
	names, problems, err := ExposeNames(servers, reserved, aliases)
	if err != nil {
		t.Fatal(err)
	}
	for exposed, want := range map[string]Route{
		"gh_list":         {Server: "gh", Tool: "list"},
		"gh_create_issue": {Server: "gh", Tool: "create_issue"},
		"gh_long":         {Server: "gh", Tool: long},
		"jira_search":     {Server: "jira", Tool: "search"},
		"jira_sbx":        {Server: "jira", Tool: "sandbox_create"},
	} {
		if got, ok := names.Route(exposed); !ok || got != want {
			t.Errorf("Route(%q) = %v, %v; want %v", exposed, got, ok, want)
		}
		if got, _ := names.Exposed(want); got != exposed {
			t.Errorf("Exposed(%v) = %q, want %q", want, got, exposed)
		}
	}
	if names.Len() != 5 {
		t.Errorf("Len() = %d, want 5", names.Len())
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Route.Server+"/"+p.Route.Tool+": "+p.Name+" "+p.Reason)
	}
	want := []string{
		`gh/Search: gh_Search collides with another tool of the same name (ignoring case)`,
		`gh/has space: gh_list alias collides with the tool "list" of server "gh"`,
		`gh/search: gh_search collides with another tool of the same name (ignoring case)`,
		`jira/get: bad alias! alias may hold only letters, digits, '_' and '-'`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestExposeNames_Budget(t *testing.T) {
	tool := strings.Repeat("t", NameBudget-len("gh_")) // exactly 48
	names, problems, _ := ExposeNames([]ServerTools{{Server: "gh", Tools: []string{tool, tool + "u"}}}, nil, nil)
	if _, ok := names.Exposed(Route{Server: "gh", Tool: tool}); !ok {
		t.Errorf("a name of exactly %d characters has no route", NameBudget)
	}
	if len(problems) != 1 || problems[0].Route.Tool != tool+"u" || !strings.Contains(problems[0].Reason, "longer than 48") {
		t.Errorf("problems = %v, want the 49-character name refused, not truncated", problems)
	}
	if names.Len() != 1 {
		t.Errorf("Len() = %d, want 1", names.Len())
	}
}

func TestExposeNames_ReservedCollision(t *testing.T) {
	_, problems, _ := ExposeNames([]ServerTools{{Server: "e2b", Tools: []string{"run_code"}}}, []string{"E2B_run_code"}, nil)
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, `connector tool "E2B_run_code"`) {
		t.Errorf("problems = %v, want a collision with the connector's tool", problems)
	}
}

func TestExposeNames_BadServers(t *testing.T) {
	if _, _, err := ExposeNames([]ServerTools{{Server: "Bad_Name"}}, nil, nil); err == nil {
		t.Error("invalid server name accepted")
	}
	if _, _, err := ExposeNames([]ServerTools{{Server: "a"}, {Server: "a"}}, nil, nil); err == nil {
		t.Error("repeated server name accepted")
	}
}
