// Command bench is mcpgate's load benchmark, run as
// `make bench` or `go run ./bench [flags]`.
//
// It starts an E2B simulator (cmd/e2bsim) and the gateway (`mcpgate serve`)
// as subprocesses on free loopback ports, on a fresh database of the test
// PostgreSQL (TEST_DATABASE_URL, else scripts/test-db.sh), so that their CPU
// time and peak memory can be read from /proc. Through the JSON API it signs
// up a user, stores an E2B key and creates MCP keys, and creates a few
// sandboxes in the simulator.
//
// Then (--compare, on by default) it builds and starts two reference servers
// doing the same E2B GET: bench/sdkserver, a bare go-sdk stateless server at
// the default GC, and bench/onehop, a plain net/http handler with no MCP
// library. A raw HTTP load generator (no MCP client library, whose cost
// would hide the servers') drives tools/call e2b_get_sandbox at each target
// and GET /sandboxes/{id} at e2bsim, in interleaved rounds, and prints the
// medians, each server's CPU per call and the ratios; then an open loop at
// --rate through the gateway and direct for --open-duration, with the
// added latency and the gateway's memory over the run.
//
// With --sdk-clients, for each concurrency C, it also drives
// tools/call of e2b_list_sandboxes and e2b_get_sandbox from C go-sdk MCP
// clients (one session and one key each) for --duration, and the same E2B
// requests sent directly to the simulator with net/http; and an open-loop
// phase at --rate calls/s, whose latency is measured from each call's
// scheduled start, so queueing is counted rather than hidden. It prints one
// table (or --json).
//
// --inprocess runs the gateway inside the benchmark's process instead (same
// wiring as serve), so that --cpuprofile and --memprofile profile it; CPU
// figures then include the load generator.
//
// Every loop is bounded by its phase's duration, and only loopback addresses
// are used.
//
// Imports from this module: internal/app, internal/audit, internal/logctx, internal/store,
// internal/store/storetest, internal/testutil, mcpgate.
package main
