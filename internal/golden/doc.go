// Package golden is for tests only: it pins a value as an indented JSON file
// under testdata, so that a change to what clients receive shows up as a
// reviewed diff. Run the test with -update to rewrite the file.
//
// It imports only the standard library and go-cmp: nothing of the gateway.
//
// Imports from this module: none.
package golden
