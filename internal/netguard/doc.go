// Package netguard decides which addresses the gateway may connect to on
// behalf of someone else's URL (an OAuth client's metadata document, a
// workspace's approval webhook): never to a special-use address unless the
// operator named its network, and never to the gateway's own machine. The
// check is meant for a dialer's Control function, so that it judges the
// address actually connected to, after DNS.
//
// Imports from this module: none.
package netguard
