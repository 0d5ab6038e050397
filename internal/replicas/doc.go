// Package replicas counts the gateway replicas serving on one database, so
// that limits meant for the whole deployment can be shared out: each replica
// enforces its share of a key's rate (the rate divided by the live replicas).
//
// Each replica writes a heartbeat row every few seconds and counts the rows
// seen recently. A replica that starts or stops cleanly says so on the
// invalidation channel, and the others count again at once; one that dies
// without a word drops out of the count when its row goes stale (the TTL).
// While the database cannot be reached the last count stands. Nothing here
// is on a call's path: a call reads the count from memory.
//
// Imports from this module: none.
package replicas
