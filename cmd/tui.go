package cmd

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/tui"
)

func newTUICmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "tui [--api URL]",
		Short: "Watch captured email and webhooks live in the terminal",
		Long: `tui is a terminal viewer of what capture caught: inboxes and endpoints on the
left, their captures in the middle (new ones arrive live, marked •), and the
detail of the selected one: a message's addresses, body, links and attachments;
a request's query, headers, body (JSON pretty-printed) and delivery history.

It works over the read API, so it can watch a remote server as well as a local
one. The API key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY, else
credentials.json in the data dir (written by ` + "`capture serve`" + `); --api defaults from
the same file, else ` + apiclient.DefaultAPI + `.

Keys: ↑↓/j k move, tab switches pane, enter opens, esc goes back, / filters,
r replays a request, d deletes, o opens a link, a saves an attachment,
? shows every key, q quits.`,
		Example: `  capture tui
  CAPTURE_API_KEY=cap_… capture tui --api https://capture.example.com/api/v1`,
		Args: noArgs,
		RunE: runTUI,
	}
	apiFlag(c)
	return c
}

func runTUI(c *cobra.Command, _ []string) error {
	client, err := apiClient(c)
	if err != nil {
		return err
	}
	err = tui.Run(c.Context(), tui.Config{
		Client:     client,
		Output:     c.OutOrStdout(),
		RefusedKey: refusedKey(c),
	})
	var se *tui.StartError
	if errors.As(err, &se) {
		return exitError{code: 2, err: se}
	}
	return err
}
