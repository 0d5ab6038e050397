// Package upstream is what the benchmark's reference servers (bench/onehop,
// bench/sdkserver) share: their flags and the one E2B call each makes per
// tool call, so that the two differ only in what they put in front of it.
//
// It imports only the standard library.
//
// Imports from this module: none.
package upstream
