// Package contract is the read API's wire contract (SPEC §8), written once:
// the JSON shapes of every route, the time format, and the error envelope
// with its one table of codes and HTTP statuses, encoded by the servers and
// decoded by the Go client.
//
// It lives beside the read API it describes (server/api) because the API is
// where the contract is decided, but it is not part of any server: it
// imports nothing of this module, so the capture listener, /mcp, the other
// listeners, `capture … --json` and the Go client (forward/apiclient) all
// depend on it without depending on each other or on the store.
package contract
