// Package service implements the gateway's services (mcpgate.AccountService,
// TwoFactorService, WorkspaceService, KeyService, ConnectionService,
// ToolService, GuardrailService, ApprovalService, NotificationService,
// AuditService, ResourceService and GrantService) on the store, the vault and the connector registry, and the
// operator's Admin (what `mcpgate user` does, audited as the operator). It is
// where the rules live: who may see and change what, which calls a
// workspace's policy and a key's scope allow, which need a confirmation or a
// person's approval (and which do another tool's job, by the connector's
// guard), what the workspace's guardrails refuse, and what the audit log
// records. The JSON API, the dashboard and the MCP endpoint call it and
// decide nothing themselves.
//
// One type per service, each with the methods of its own concern: Accounts,
// TwoFactor, Workspaces, Keys, Connections, Tools (tools, guardrails, the
// policy cache and the call path), Approvals, Notifications, Audit,
// Resources, Grants, and Deliveries (what became of the mails and webhooks
// sent). New builds them together as a Set on one Service, the state they
// share (the caches and the trust that decides how long their entries
// stand, the advisory locker, the login throttle, the approvals' argument
// key); each points to it, and to the other services it works with through
// named fields (a tool call that needs an approval asks Approvals, an
// approval step tells Notifications), never through one object holding all
// of them. Under them all is the core (store, audit log, log, clock,
// password costs), which Admin and Deliveries are built on alone. Servers
// (the workspaces' upstream MCP servers, mcpgate.ServerService) and
// Endpoints (each server's own MCP endpoint, mcpgate.ServerEndpointService,
// on Servers and the tool service) are built by the wiring beside the Set.
//
// What it caches (tool policies, sealed credentials) is dropped
// across replicas by Invalidate, which the wiring feeds from the store's
// LISTEN/NOTIFY, and kept no longer than a TTL in any case. No database
// query runs on a tool call whose key, policy and credential are cached,
// but one: a call that changes one upstream resource, or starts one where
// the workspace limits how many run, is weighed and run under an advisory
// lock (lockChanged, checkRunning), so that no other call overtakes its
// check on any replica.
//
// Two-factor sign-in (totp.go) uses github.com/pquerna/otp for RFC 6238 and
// RFC 4226: it is small (no dependency but github.com/boombuler/barcode for
// the QR code), widely used and maintained, implements exactly the defaults
// authenticator apps expect (SHA-1, six digits, 30-second steps), builds the
// otpauth:// URL, and draws the QR code itself, so that the secret never
// goes to an outside service to be rendered. Its own Validate only answers
// yes or no, so the time step a code belongs to is found here (with the
// library's code generator) for the replay check; the secret is sealed with
// the vault like an E2B key, and recovery codes are stored as SHA-256 hashes.
//
// Approval notifications (notifications.go) follow each approval step once
// it is stored and audited: mail to the people who may decide (the
// decision rules of requireDecider, the mail throttle, one mail per person
// and approval) and a webhook queued as a row that internal/webhook's
// sender claims, tries and records through Deliveries (its Queue), so that
// a stop or a crash loses no delivery. Nothing in them fails the step.
//
// A call that needs a person's approval may wait for the decision
// (approvals_wait.go, the workspace's approval_wait_seconds): AwaitApproval
// holds no database connection, only a place in this replica's bounded list
// of waits, woken by the decision's notification (WakeApprovalWaits, fed by
// the wiring's listener) or by the decision made here.
//
// Outside the module it imports pquerna/otp; it never imports api, web or
// mcp.
//
// Imports from this module: connectors, internal/mail, internal/outbox, internal/password,
// internal/store, internal/trustcache, internal/upstream, internal/upstreamauth, internal/webhook, mcpgate, vault.
package service
