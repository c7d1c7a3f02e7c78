package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/server/api/contract"
)

func newMCPCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve captures to a coding agent over MCP (stdio)",
		Long: `mcp lets a coding agent read what capture caught: it speaks the Model Context
Protocol on stdin and stdout, with read-only tools over the read API (inboxes,
messages, links, endpoints, requests, waits) and one that replays a captured
webhook request to its endpoint's saved target. Register it in the agent's MCP
settings as the command "capture" with the argument "mcp".

The API key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY, else credentials.json
in the data dir (written by ` + "`capture serve`" + `); --api defaults from the same file,
else http://127.0.0.1:7780/api/v1. The key is checked before serving; a missing
or rejected key, or an API that does not answer, ends the command with exit code 2.

` + "`capture serve`" + ` also serves MCP over streamable HTTP at /mcp, with the same key as a
Bearer token.`,
		Example: `  capture mcp
  CAPTURE_API_KEY=cap_… capture mcp --api http://127.0.0.1:7780/api/v1`,
		Args: noArgs,
		RunE: runMCP,
	}
	apiFlag(c)
	return c
}

func runMCP(c *cobra.Command, _ []string) error {
	client, err := apiClient(c)
	if err != nil {
		return err
	}
	// An agent shows a server that dies at start far more clearly than tools
	// that fail one by one, so a bad key or a stopped server stops here.
	if _, err := client.Me(c.Context()); err != nil {
		var ae *contract.Error
		if errors.As(err, &ae) && ae.Code == contract.CodeUnauthorized {
			err = fmt.Errorf("the API at %s refused %s", client.BaseURL(), refusedKey(c))
		}
		return exitError{code: 2, err: err}
	}

	err = mcp.RunStdio(c.Context(), client, versionString(), c.InOrStdin(), c.OutOrStdout())
	// The agent closing stdin, or a signal, is the normal end.
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// mcpVersion is what the server tells clients at initialization: the
// version `capture version` prints, without the VCS detail.
