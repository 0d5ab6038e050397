package main

import "github.com/mcpgate/mcpgate/internal/oauth"

// testOAuthCIMD is set only by tests, never by configuration: it lets the
// authorization server fetch client ID metadata documents from a local TLS
// server, which the production policy refuses (loopback, untrusted root).
var testOAuthCIMD oauth.CIMDOptions
