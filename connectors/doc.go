// Package connectors defines what a connector is: a named upstream with a
// credential it can check and a set of tools that run with that credential.
// The registry lists the connectors a gateway serves; the mcp package adapts
// their tools to MCP, and the dashboard calls the same tools, so a tool has one
// implementation whatever the caller. Optional interfaces and hooks tell the
// gateway what it needs without naming an upstream: a tool's Guard (what a
// call asks for, and whether it does another tool's job), its Changes (the
// one resource a call changes, so that such calls are serialised), Describer (a
// summary for the person approving a call), RunningCounter (for the
// guardrail on how many run at once), Browser (the dashboard's view of its
// resources), Presenter (how a person connects it and what its guardrail
// settings mean, in its words) and DemoDetector (whether its upstream is a
// bundled simulator, asked by a DemoProbe). Info gathers what the dashboard
// shows of a connector, so that the dashboard names none.
//
// A connector lives in its own sub-package (connectors/e2b) and imports only
// this package, mcpgate and the standard library. This package imports
// github.com/google/jsonschema-go as well: it is the schema library the MCP SDK
// itself uses, so the schemas a tool declares, validates against and publishes
// are one and the same value.
//
// Imports from this module: mcpgate.
package connectors
