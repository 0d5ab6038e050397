// Package conformance lets tests hold an MCP server to the official MCP
// conformance suite (@modelcontextprotocol/conformance, pinned with its
// Node.js 22 by testdata/conformance-suite/package-lock.json) and gives
// them the suite's reference server to measure against.
//
// Run drives the suite's server scenarios against any URL and returns one
// Result per scenario, read from the checks.json files the suite writes
// (its machine-readable output) and cross-checked against the counts it
// prints, so that a change in the suite's output fails loudly instead of
// reading as a pass.
//
// StartReference runs the reference "everything" server that the suite's
// own sdk command runs for the Go SDK: conformance/everything-server of
// the go-sdk module this module already requires (go.sum pins its hash),
// built with go build from the module cache. The suite's TypeScript
// reference server (examples/servers/typescript in the suite's git
// repository) is in no npm package: the suite's package ships only dist
// and requirements, and the TypeScript SDK's packages ship only dist, so a
// test that cannot reach the repository can run it only from a copy, which
// the project does not keep. The Go server mirrors it: the same 32 tool and
// prompt names (it adds test_x_mcp_header), the same static resources and
// template, and it passes every active server scenario of both protocol
// generations (stateful for 2025-11-25, stateless for 2026-07-28).
// StartEverything runs, under Node, the registry's everything server
// (@modelcontextprotocol/server-everything), which is not the suite's
// reference: a second server no one on the project wrote.
//
// A test of a front end (the gateway's per-server endpoint) takes the
// baseline from the reference at run time and requires it there:
//
//	suite := conformance.Install(t)
//	ref := conformance.StartReference(t, conformance.ReferenceOptions{})
//	want := conformance.Names(suite.Run(t, ref, conformance.Options{}), conformance.Passed)
//	// ... register ref behind the gateway ...
//	got := conformance.Index(suite.Run(t, front, conformance.Options{}))
//	for _, name := range conformance.Without(want, notYet...) {
//		if got[name].Status != conformance.Passed { t.Errorf("%s: %s", name, got[name].Message) }
//	}
//
// A run is one Node process for the whole suite (31 active scenarios at
// 2025-11-25, 20 at 2026-07-28: 1.5 to 5 s against a local server,
// depending on the machine's load), or one process per scenario named in
// Options.Scenarios, for a chosen subset.
//
// Imports from this module: internal/testutil, internal/testutil/npmtest.
package conformance
