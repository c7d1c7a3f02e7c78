// Package apiclient is the Go client of capture's read API, shared by the
// forwarding client, the terminal viewer and the MCP server, and the
// credentials.json they fall back on.
package apiclient
