// Package servicetest builds the real services on a fresh test database, for
// the tests of every package that calls them (the MCP endpoint, the JSON API,
// the services themselves): one way to set them up, so that no test wires a
// path production does not use. NewMailer adds a real mailer on a test SMTP
// server. It is imported by tests only.
//
// Imports from this module: internal/mail, internal/mail/mailtest, internal/service,
// internal/store, internal/store/storetest, mcpgate, vault.
package servicetest
