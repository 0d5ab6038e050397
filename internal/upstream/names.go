package upstream

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MaxServerName is the longest server name a workspace may register.
const MaxServerName = 16

// NameBudget is the longest exposed tool name the gateway publishes. The
// protocol allows 64 characters; clients prefix names of their own (Claude
// Code's "mcp__<connector>__"), so the gateway leaves them room.
const NameBudget = 48

var (
	serverNamePattern = regexp.MustCompile(`^[a-z0-9](-?[a-z0-9])*$`)
	// exposedNameChars with NameBudget (below the protocol's 64) makes every
	// exposed name match ^[a-zA-Z0-9_-]{1,64}$.
	exposedNameChars = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// ValidateServerName reports why name cannot name an upstream server: it
// must match ^[a-z0-9](-?[a-z0-9])*$ and be at most MaxServerName long.
// Because a server name never holds "_", "<server>_<tool>" is unique for
// every distinct pair, yet calls are still routed by the table ExposeNames
// builds, never by splitting a name.
func ValidateServerName(name string) error {
	if len(name) > MaxServerName {
		return fmt.Errorf("server name %q is longer than %d characters", name, MaxServerName)
	}
	if !serverNamePattern.MatchString(name) {
		return fmt.Errorf("server name %q must be lower-case letters and digits, with single hyphens between them", name)
	}
	return nil
}

// Route is where an exposed name leads: a server of the workspace and the
// tool's name as that server gave it.
type Route struct {
	Server string
	Tool   string
}

// ServerTools is one server's tool names as its catalog gave them.
type ServerTools struct {
	Server string
	Tools  []string
}

// NameProblem says why a tool has no exposed name: it needs an admin alias.
type NameProblem struct {
	Route Route
	// Name is the name that was refused: the generated "<server>_<tool>" or
	// the alias given.
	Name   string
	Reason string
}

// Names is the routing table from exposed names to routes.
type Names struct {
	byName  map[string]Route
	byRoute map[Route]string
}

// Route returns the route of an exposed name.
func (n Names) Route(exposed string) (Route, bool) {
	r, ok := n.byName[exposed]
	return r, ok
}

// Exposed returns the exposed name of a route.
func (n Names) Exposed(r Route) (string, bool) {
	name, ok := n.byRoute[r]
	return name, ok
}

// Len returns how many routes have a name.
func (n Names) Len() int { return len(n.byName) }

// ExposeNames builds the table of exposed names for servers' tools:
// "<server>_<tool>", or the admin's alias for the route when aliases has
// one. reserved holds names already taken on the same endpoint (the
// connectors' tools). A generated name that is invalid, longer than
// NameBudget, or that collides (ignoring case, since some clients fold it)
// with a reserved name or another generated name, is left out of the table
// and reported, never truncated; an alias is checked the same way and must
// also avoid every generated name kept. Aliases for routes not in servers
// are ignored. An invalid or repeated server name is an error: it is a
// registration mistake, not something an alias mends.
func ExposeNames(servers []ServerTools, reserved []string, aliases map[Route]string) (Names, []NameProblem, error) {
	seen := map[string]bool{}
	for _, s := range servers {
		if err := ValidateServerName(s.Server); err != nil {
			return Names{}, nil, err
		}
		if seen[s.Server] {
			return Names{}, nil, fmt.Errorf("server name %q appears twice", s.Server)
		}
		seen[s.Server] = true
	}
	taken := map[string]string{} // folded name -> what holds it, for messages
	for _, r := range reserved {
		taken[strings.ToLower(r)] = fmt.Sprintf("the connector tool %q", r)
	}
	names := Names{byName: map[string]Route{}, byRoute: map[Route]string{}}
	var problems []NameProblem
	generated := map[string][]Route{}
	var order []string
	for _, s := range servers {
		for _, tool := range s.Tools {
			r := Route{Server: s.Server, Tool: tool}
			if _, ok := aliases[r]; ok {
				continue
			}
			name := s.Server + "_" + tool
			if reason := nameFault(name); reason != "" {
				problems = append(problems, NameProblem{Route: r, Name: name, Reason: reason})
				continue
			}
			key := strings.ToLower(name)
			if len(generated[key]) == 0 {
				order = append(order, key)
			}
			generated[key] = append(generated[key], r)
		}
	}
	for _, key := range order {
		routes := generated[key]
		holder, clash := taken[key]
		for _, r := range routes {
			name := r.Server + "_" + r.Tool
			switch {
			case clash:
				problems = append(problems, NameProblem{Route: r, Name: name, Reason: "collides with " + holder})
			case len(routes) > 1:
				problems = append(problems, NameProblem{Route: r, Name: name, Reason: "collides with another tool of the same name (ignoring case)"})
			default:
				names.add(name, r)
			}
		}
		if !clash && len(routes) == 1 {
			taken[key] = fmt.Sprintf("the tool %q of server %q", routes[0].Tool, routes[0].Server)
		}
	}
	problems = append(problems, names.addAliases(servers, aliases, taken)...)
	return names, sortedProblems(problems), nil
}

// addAliases enters the aliases of routes present in servers, in the order
// servers gives, refusing invalid ones and ones whose name is taken.
func (n Names) addAliases(servers []ServerTools, aliases map[Route]string, taken map[string]string) []NameProblem {
	var problems []NameProblem
	for _, s := range servers {
		for _, tool := range s.Tools {
			r := Route{Server: s.Server, Tool: tool}
			alias, ok := aliases[r]
			if !ok {
				continue
			}
			if _, done := n.byRoute[r]; done {
				problems = append(problems, NameProblem{Route: r, Name: alias, Reason: "the server lists this tool twice"})
				continue
			}
			if reason := nameFault(alias); reason != "" {
				problems = append(problems, NameProblem{Route: r, Name: alias, Reason: "alias " + reason})
				continue
			}
			key := strings.ToLower(alias)
			if holder, clash := taken[key]; clash {
				problems = append(problems, NameProblem{Route: r, Name: alias, Reason: "alias collides with " + holder})
				continue
			}
			taken[key] = fmt.Sprintf("the alias of tool %q of server %q", r.Tool, r.Server)
			n.add(alias, r)
		}
	}
	return problems
}

func (n Names) add(name string, r Route) {
	n.byName[name] = r
	n.byRoute[r] = name
}

// nameFault says why name cannot be exposed, or "" when it can.
func nameFault(name string) string {
	if name == "" {
		return "is empty"
	}
	if !exposedNameChars.MatchString(name) {
		return "may hold only letters, digits, '_' and '-'"
	}
	if len(name) > NameBudget {
		return fmt.Sprintf("is longer than %d characters", NameBudget)
	}
	return ""
}

// sortedProblems orders problems for stable messages and tests.
func sortedProblems(p []NameProblem) []NameProblem {
	slices.SortStableFunc(p, func(a, b NameProblem) int {
		if c := strings.Compare(a.Route.Server, b.Route.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Route.Tool, b.Route.Tool)
	})
	return p
}
