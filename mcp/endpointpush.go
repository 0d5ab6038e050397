package mcp

// The list changes a server's own endpoint pushes besides its tools: its
// prompts and its resources (with their templates), as the last discovery
// or re-discovery stored them. A discovery that changes them writes and
// invalidates the workspace's servers (kind policy), which reaches
// CatalogChanged on every replica; each of the endpoint's open streams then
// reads its lists again and pushes notifications/prompts/list_changed or
// notifications/resources/list_changed where the digest of that list
// changed, as for tools (listen.go). Only where the upstream declares
// listChanged for them: the endpoint declares what the upstream does, and a
// client is told of a change the upstream itself would announce, seen by the
// gateway's discovery.

import (
	"context"
	"encoding/json"

	"github.com/mcpgate/mcpgate"
)

// endpointLists are the lists a stream of server's endpoint watches: its
// tools always (the gateway's own changes), its prompts and resources
// where the upstream, as ep says, declares their list changes.
func endpointLists(eps mcpgate.ServerEndpointService, server string, ep *mcpgate.ServerEndpoint) []pushList {
	lists := []pushList{{notificationListChanged, endpointList(eps, server)}}
	up := upstreamCapabilities(ep)
	if up.Prompts != nil && up.Prompts.ListChanged {
		lists = append(lists, pushList{notificationPromptsChanged, storedList(eps, server, func(ep *mcpgate.ServerEndpoint) []json.RawMessage {
			return []json.RawMessage{ep.Prompts}
		})})
	}
	if up.Resources != nil && up.Resources.ListChanged {
		lists = append(lists, pushList{notificationResourcesChanged, storedList(eps, server, func(ep *mcpgate.ServerEndpoint) []json.RawMessage {
			return []json.RawMessage{ep.Resources, ep.ResourceTemplates}
		})})
	}
	return lists
}

// storedList reads one of the server's stored lists for the caller, as
// bytes to digest; a server the caller no longer has lists nothing.
func storedList(eps mcpgate.ServerEndpointService, server string, of func(*mcpgate.ServerEndpoint) []json.RawMessage) toolLister {
	return func(ctx context.Context, a *mcpgate.Actor, _ string) ([]byte, error) {
		ep, err := eps.ServerEndpoint(ctx, a, server)
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(of(ep))
	}
}
