package connectors

// What a connector tells MCP clients besides its tools. Both interfaces are
// optional; the MCP endpoint asks every registered connector and names none.

// Instructor is a connector with instructions for the model: what its tools
// manage and which of them cost money or cannot be undone.
type Instructor interface {
	// Title names what the connector manages ("E2B sandboxes"), for the
	// server's title.
	Title() string
	// Instructions are a few sentences for the model.
	Instructions() string
}

// Prompt is an MCP prompt for a common journey.
type Prompt struct {
	Name, Title, Description string
	// Text is the user message the prompt puts in the conversation.
	Text string
	// Requires are the tools the journey uses; the prompt is offered only
	// to callers who may call every one of them.
	Requires []string
}

// Prompter is a connector that offers prompts.
type Prompter interface {
	Prompts() []Prompt
}
