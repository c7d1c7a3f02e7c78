// Package apiclient is the Go client of capture's read API, the one that
// the terminal viewer, the forwarding client, the MCP server and `capture
// wait` share, with the one retry policy they all follow (Retry, Backoff).
//
// It speaks the wire contract of server/api/contract and imports nothing
// else of this module but store/datadir, so a program built on it links
// neither the store nor SQLite. It lives under forward/ with the other
// clients of the API; nothing under server/ calls the API over HTTP.
package apiclient
