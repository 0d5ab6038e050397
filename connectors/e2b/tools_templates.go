package e2b

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// PageIn is the paging input shared by the list tools.
type PageIn struct {
	Limit     int    `json:"limit,omitempty" jsonschema:"how many items to return (1-100)"`
	NextToken string `json:"next_token,omitempty" jsonschema:"the next_token of the previous page, unchanged; omit for the first page"`
}

// PageOut is the output of the list tools that page with next_token: one
// page of items, and the token of the next when there is one.
type PageOut[T any] struct {
	Data      []T    `json:"data"`
	NextToken string `json:"next_token,omitempty"`
}

// NoInput is the input of tools without arguments.
type NoInput struct{}

// DefaultTemplatesOut is e2b_list_default_templates's output.
type DefaultTemplatesOut struct {
	Templates []DefaultTemplateOut `json:"templates"`
}

func (c *Connector) listDefaultTemplatesTool() *connectors.Tool {
	return connectors.NewTool(connectors.Spec{
		Name:  ToolListDefaultTemplates,
		Title: "List E2B default templates",
		Description: "List E2B's default (public) sandbox templates, such as base or code-interpreter, with their CPU count, " +
			"memory, disk size and envd version. Use a template_id or name from here with e2b_create_sandbox. Read-only.",
		Annotations:    readOnly,
		DefaultEnabled: true,
		Output:         outputEdits,
	}, func(ctx context.Context, key mcpgate.Secret, _ NoInput) (DefaultTemplatesOut, error) {
		ts, err := c.client.ListDefaultTemplates(ctx, key)
		if err != nil {
			return DefaultTemplatesOut{}, err
		}
		return DefaultTemplatesOut{Templates: mapItems(ts, defaultTemplateOut)}, nil
	})
}

// TemplatesOut is e2b_list_templates's output.
type TemplatesOut = PageOut[TemplateOut]

func (c *Connector) listTemplatesTool() *connectors.Tool {
	return connectors.NewTool(connectors.Spec{
		Name:  ToolListTemplates,
		Title: "List the team's E2B templates",
		Description: "List the team's own E2B templates (newest first) with their names, latest build status, resources and " +
			"spawn count. Public default templates are listed by e2b_list_default_templates instead. Paged: when next_token " +
			"is present, pass it back to get the next page. Read-only.",
		Annotations:    readOnly,
		DefaultEnabled: true,
		Output:         outputEdits,
		Schema:         pageSchema(),
	}, func(ctx context.Context, key mcpgate.Secret, in PageIn) (TemplatesOut, error) {
		page, err := c.client.ListTemplates(ctx, key, in.Limit, in.NextToken)
		if err != nil {
			return TemplatesOut{}, err
		}
		return TemplatesOut{Data: mapItems(page.Items, templateOut), NextToken: page.NextToken}, nil
	})
}

// TemplateBuildsIn is e2b_list_template_builds's input.
type TemplateBuildsIn struct {
	TemplateID string `json:"template_id" jsonschema:"the template ID (not an alias), from e2b_list_templates"`
	PageIn
}

// TemplateBuildsOut is e2b_list_template_builds's output.
type TemplateBuildsOut struct {
	TemplateID    string     `json:"template_id"`
	Names         []string   `json:"names,omitempty"`
	Public        bool       `json:"public"`
	SpawnCount    int64      `json:"spawn_count"`
	CreatedAt     string     `json:"created_at"`
	UpdatedAt     string     `json:"updated_at"`
	LastSpawnedAt string     `json:"last_spawned_at,omitempty"`
	Builds        []BuildOut `json:"builds"`
	NextToken     string     `json:"next_token,omitempty"`
}

func (c *Connector) listTemplateBuildsTool() *connectors.Tool {
	return connectors.NewTool(connectors.Spec{
		Name:  ToolListTemplateBuilds,
		Title: "List an E2B template's builds",
		Description: "List the builds of one of the team's templates (status, resources, envd version, times). Takes a " +
			"template ID, not an alias; another team's template, including a public one, is refused. Paged with " +
			"next_token. Read-only.",
		Annotations:    readOnly,
		DefaultEnabled: true,
		Output:         outputEdits,
		Schema:         pageSchema(withPattern("template_id", templateIDPattern)),
	}, func(ctx context.Context, key mcpgate.Secret, in TemplateBuildsIn) (TemplateBuildsOut, error) {
		t, next, err := c.client.GetTemplate(ctx, key, in.TemplateID, in.Limit, in.NextToken)
		if err != nil {
			return TemplateBuildsOut{}, err
		}
		return TemplateBuildsOut{
			TemplateID: t.TemplateID, Names: t.Names, Public: t.Public, SpawnCount: t.SpawnCount,
			CreatedAt: timestamp(t.CreatedAt), UpdatedAt: timestamp(t.UpdatedAt), LastSpawnedAt: timestampPtr(t.LastSpawnedAt),
			Builds: mapItems(t.Builds, buildOut), NextToken: next,
		}, nil
	})
}

// SnapshotsIn is e2b_list_snapshots's input.
type SnapshotsIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"only snapshots taken from this sandbox"`
	Name      string `json:"name,omitempty" jsonschema:"only snapshots with this name (name, namespace/name or name:tag)"`
	PageIn
}

// SnapshotOut is one persistent snapshot.
type SnapshotOut struct {
	SnapshotID string   `json:"snapshot_id"`
	Names      []string `json:"names"`
}

// SnapshotsOut is e2b_list_snapshots's output.
type SnapshotsOut = PageOut[SnapshotOut]

func (c *Connector) listSnapshotsTool() *connectors.Tool {
	return connectors.NewTool(connectors.Spec{
		Name:  ToolListSnapshots,
		Title: "List E2B snapshots",
		Description: "List the team's persistent snapshots (templates saved from a running sandbox; a new sandbox can be " +
			"created from a snapshot_id). Paused sandboxes are not snapshots: list them with e2b_list_sandboxes and " +
			"state=paused. Paged with next_token. Read-only.",
		Annotations:    readOnly,
		DefaultEnabled: true,
		Output:         outputEdits,
		Schema:         pageSchema(withPattern("sandbox_id", sandboxIDPattern), withPattern("name", templateRefPattern)),
	}, func(ctx context.Context, key mcpgate.Secret, in SnapshotsIn) (SnapshotsOut, error) {
		page, err := c.client.ListSnapshots(ctx, key, in.SandboxID, in.Name, in.Limit, in.NextToken)
		if err != nil {
			return SnapshotsOut{}, err
		}
		return SnapshotsOut{NextToken: page.NextToken, Data: mapItems(page.Items, func(s Snapshot) SnapshotOut {
			//lint:ignore S1016 outputs are built field by field, so that a field E2B adds never reaches the model unvetted
			return SnapshotOut{SnapshotID: s.SnapshotID, Names: s.Names}
		})}, nil
	})
}
