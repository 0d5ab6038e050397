package service

import (
	"context"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Requests from an upstream server to the caller's client during a tool
// call (sampling, elicitation, roots). The gateway's sessions with the
// server declare only what both the caller's client declared and the
// server is allowed (sampling and roots are off unless an admin turns
// them on; elicitation's URL mode sends a person only to a host on the
// server's allow-list); each request is checked against the same, sent
// on to the caller by the front door (mcpgate.Relay.Request), and
// audited: the method, an elicitation's message and mode, a URL's host,
// the action answered, never a sampling prompt nor an answer's values.

// codeRefusedRequest is the JSON-RPC error a server gets for a request
// the gateway does not relay: its session did not declare the capability,
// or the server's settings refuse it. (Invalid Request: the server asked
// for what it was told it cannot have.)
const codeRefusedRequest = -32600

// maxAuditedMessage bounds an elicitation's message in the audit log.
const maxAuditedMessage = 500

// relayCapabilities are the capabilities a call's sessions with the
// server declare: none when the front door can carry no request to this
// caller; else what the caller's client declared that the server is
// allowed, and, for a caller that answers input requests by retrying
// (2026-07-28), that the upstream's input_required result is passed on.
func relayCapabilities(relay mcpgate.Relay, allowed mcpgate.ClientCapabilities) upstream.Capabilities {
	if relay.Request == nil && !relay.InputRetry {
		return upstream.Capabilities{}
	}
	return upstream.Capabilities{ClientCapabilities: relay.Capabilities.Intersect(allowed), PassInputRequests: relay.InputRetry}
}

// clientRequests answers the requests of u's server to its client during
// one call: each checked against what the call's sessions declared
// (caps) and the server's URL allow-list, relayed to the caller, audited.
func (s *Tools) clientRequests(a *mcpgate.Actor, u *upstreamTool, srv upstreamServer, caps mcpgate.ClientCapabilities,
	relay mcpgate.Relay, redact func(string) string) func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		args := map[string]any{"server": u.server, "tool": u.tool.Name, "method": method}
		refuse := func(msg string) (json.RawMessage, error) {
			args["action"] = "refused"
			args["reason"] = msg
			s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerClientRequest, args))
			return nil, &mcpgate.ClientRPCError{Code: codeRefusedRequest, Message: msg}
		}
		if msg := s.checkClientRequest(ctx, a, u, srv, caps, method, params, args, redact); msg != "" {
			return refuse(msg)
		}
		if relay.Request == nil {
			return refuse("the gateway's caller answers requests only by retrying its call (2026-07-28), not during it")
		}
		// The server's credential never reaches the caller, even where the
		// server writes it into its request (a message quoting its own
		// configuration): the values are replaced as in its log messages.
		params = json.RawMessage(redact(string(params)))
		res, err := relay.Request(ctx, mcpgate.ClientRequest{Method: method, Params: params})
		switch rpc := (*mcpgate.ClientRPCError)(nil); {
		case errors.As(err, &rpc):
			args["action"] = "error"
			args["error_code"] = rpc.Code
		case err != nil:
			args["action"] = "not_answered"
			args["reason"] = mcpgate.ErrorMessage(err)
		case method == mcpgate.MethodElicit:
			args["action"] = elicitAction(res)
		default:
			args["action"] = "answered"
		}
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerClientRequest, args))
		return res, err
	}
}

// checkClientRequest says why a request of the server is not relayed (""
// when it is), and fills the audit arguments of what it may record.
func (s *Tools) checkClientRequest(ctx context.Context, a *mcpgate.Actor, u *upstreamTool, srv upstreamServer,
	caps mcpgate.ClientCapabilities, method string, params json.RawMessage, args map[string]any, redact func(string) string) string {
	switch method {
	case mcpgate.MethodCreateMessage:
		var p struct {
			Tools []json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(params, &p)
		switch {
		case !caps.Sampling:
			return "sampling is not available through the gateway for this server (off in its settings, or the client does not offer it)"
		case len(p.Tools) > 0 && !caps.SamplingTools:
			return "sampling with tools is not available through the gateway for this server"
		}
		return ""
	case mcpgate.MethodListRoots:
		if !caps.Roots {
			return "roots are not available through the gateway for this server (off in its settings, or the client does not offer them)"
		}
		return ""
	case mcpgate.MethodElicit:
		var p struct {
			Mode    string `json:"mode"`
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return "the elicitation's params are not a JSON object of the protocol's shape"
		}
		if p.Mode == "" {
			p.Mode = "form"
		}
		args["mode"] = p.Mode
		args["message"] = capMessage(redact(p.Message))
		switch p.Mode {
		case "form":
			if !caps.ElicitationForm {
				return "the client does not take form elicitations"
			}
		case "url":
			host, ok := mcpgate.ElicitationHostAllowed(srv.elicitationHosts, p.URL)
			if host != "" {
				args["url_host"] = host
				s.recordElicitationHost(ctx, a.WorkspaceID, u.server, host)
			}
			switch {
			case !caps.ElicitationURL:
				return "the client does not take URL elicitations"
			case host == "":
				return "the elicitation's URL is not an https URL (or an http one on loopback)"
			case !ok:
				return "the gateway sends people only to hosts a workspace admin allowed for this server, and " + host + " is not one"
			}
		default:
			return "unknown elicitation mode"
		}
		return ""
	}
	return "the gateway does not relay " + method + " to clients"
}

// elicitAction is the action an elicitation's answer gives (accept,
// decline, cancel), read from the answer; nothing else of it is kept.
func elicitAction(res json.RawMessage) string {
	var r struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(res, &r)
	switch r.Action {
	case "accept", "decline", "cancel":
		return r.Action
	}
	return "answered"
}

// capMessage cuts an audited message to maxAuditedMessage bytes on a rune
// boundary.
func capMessage(m string) string {
	if len(m) <= maxAuditedMessage {
		return m
	}
	m = m[:maxAuditedMessage]
	for !utf8.ValidString(m) {
		m = m[:len(m)-1]
	}
	return m + "…"
}

// auditInputRequests audits the input requests of an upstream's
// input_required result passed to the caller (2026-07-28), as a relayed
// request is, and refuses the result (nil, the reason) when one of them
// asks what the server may not: the caller answers them all in its retry,
// so one refused is the call refused.
func (s *Tools) auditInputRequests(ctx context.Context, a *mcpgate.Actor, u *upstreamTool, srv upstreamServer,
	caps mcpgate.ClientCapabilities, raw json.RawMessage, redact func(string) string) string {
	res := upstream.ReadInputRequired(raw)
	if res == nil {
		return ""
	}
	refused := ""
	for _, r := range res.InputRequests {
		args := map[string]any{"server": u.server, "tool": u.tool.Name, "method": r.Method, "action": "passed"}
		if msg := s.checkClientRequest(ctx, a, u, srv, caps, r.Method, r.Params, args, redact); msg != "" {
			args["action"], args["reason"] = "refused", msg
			refused = msg
		}
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerClientRequest, args))
	}
	return refused
}

// auditInputResponses audits the caller's answers to an upstream's input
// requests that its retry carries (2026-07-28): for each, the action it
// gives (an elicitation's accept, decline or cancel; "answered" for a
// sampling or the roots), never a value.
func (s *Tools) auditInputResponses(ctx context.Context, a *mcpgate.Actor, u *upstreamTool, raw json.RawMessage) {
	var answers map[string]json.RawMessage
	if json.Unmarshal(raw, &answers) != nil {
		return
	}
	for id, ans := range answers {
		args := map[string]any{"server": u.server, "tool": u.tool.Name, "input_request": capMessage(id),
			"action": elicitAction(ans)}
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerClientRequest, args))
	}
}
