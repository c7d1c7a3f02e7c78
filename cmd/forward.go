package cmd

import (
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capturedev/capture/cmd/started"
	"github.com/capturedev/capture/forward"
)

func newForwardCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "forward --endpoint whe_… --to URL",
		Short: "Deliver captured webhook requests to a local handler",
		Long: `forward pulls the requests an endpoint captures from the read API and delivers
each one, once, to a handler on this machine: same method, the captured path and
query appended to --to, the same headers (minus hop-by-hop ones, Host set to the
target) and the same body bytes. It never listens on a port or opens a tunnel.

Only requests captured after the start are delivered; --replay-last N also
delivers the N newest existing ones first. Each pull is a long-poll that the API
holds until a request is captured, so delivery starts within milliseconds of
the capture, while an idle client calls once per --interval. Each result is printed and recorded
in the request's delivery history. A failed delivery is not retried.

The API key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY, else credentials.json
in the data dir (written by ` + "`capture serve`" + `); --api defaults from the same file,
else http://127.0.0.1:7780/api/v1.

--output json prints NDJSON on stdout: one {"type":"ready"} object, one
{"type":"delivery"} object per delivery (time, request_id, method, path, url,
status, error, error_class, duration_ms, bytes), and a {"type":"summary"} on stop.
Warnings go to stderr.

Exit codes: 0 after Ctrl-C, 2 for a bad flag or a failed start (bad key,
unknown endpoint, API unreachable), 1 when the API stops accepting the key or
the endpoint mid-run.`,
		Example: `  capture forward --endpoint whe_… --to localhost:3000
  capture forward --endpoint whe_… --to http://127.0.0.1:8080/hooks --replay-last 5
  capture forward --endpoint whe_… --to localhost:3000 --output json`,
		Args: noArgs,
		RunE: runForward,
	}
	c.SetFlagErrorFunc(forwardFlagError)
	f := c.Flags()
	f.String("endpoint", "", "webhook endpoint id (whe_…) to forward (required)")
	f.String("to", "", "base URL of the local handler; the captured path is appended (required; no scheme means http://)")
	apiFlag(c)
	f.Int("interval", int(forward.DefaultInterval/time.Second), "seconds between pulls while idle, 1 to 60 (each pull waits up to that long, 30 at most, for a new request)")
	f.Int("replay-last", 0, "also deliver the N newest existing requests first, oldest first")
	f.String("output", forward.OutputText, "output format: text or json (NDJSON)")
	return c
}

// forwardFlagError says what a number flag wants in place of the parser's
// own text (`invalid argument "1.5" for "--interval" flag:
// strconv.ParseInt: …`). The Python client prints the same words.
func forwardFlagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		switch bad.GetFlag().Name {
		case "interval":
			return usagef("--interval %s: want a whole number of seconds from 1 to 60", bad.GetValue())
		case "replay-last":
			return usagef("--replay-last %s: want a whole number, 0 or more", bad.GetValue())
		}
	}
	return flagError(nil, err)
}

func runForward(c *cobra.Command, _ []string) error {
	f := c.Flags()
	endpoint, _ := f.GetString("endpoint")
	to, _ := f.GetString("to")
	interval, _ := f.GetInt("interval")
	replayLast, _ := f.GetInt("replay-last")
	output, _ := f.GetString("output")

	switch {
	case endpoint == "":
		return usagef("--endpoint is required (an endpoint id, whe_…; `capture endpoint list` shows them)")
	case !strings.HasPrefix(endpoint, "whe_"):
		return usagef("--endpoint %q: want an endpoint id (whe_…)", endpoint)
	case to == "":
		return usagef("--to is required (the local handler's base URL, e.g. localhost:3000)")
	case interval < 1 || interval > 60:
		return usagef("--interval %d: want 1 to 60 seconds", interval)
	case replayLast < 0:
		return usagef("--replay-last %d: want 0 or more", replayLast)
	case output != forward.OutputText && output != forward.OutputJSON:
		return usagef("--output %q: want text or json", output)
	}
	target, err := forward.ParseTarget(to)
	if err != nil {
		return usagef("--to: %v", err)
	}
	client, err := apiClient(c)
	if err != nil {
		return err
	}

	stdout := c.OutOrStdout()
	err = forward.Run(c.Context(), forward.Config{
		Endpoint:   endpoint,
		To:         target,
		Interval:   time.Duration(interval) * time.Second,
		ReplayLast: replayLast,
		Start:      started.Launched(),
		Output:     output,
		Stdout:     stdout,
		Stderr:     c.ErrOrStderr(),
		Color:      output == forward.OutputText && forward.ColorFor(stdout),
		Client:     client,
		RefusedKey: refusedKey(c),
	})
	var se *forward.StartError
	if errors.As(err, &se) {
		return exitError{code: 2, err: se}
	}
	return err
}
