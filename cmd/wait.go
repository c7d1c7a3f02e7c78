package cmd

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/cmd/started"
	"github.com/capturedev/capture/forward/wait"
	"github.com/capturedev/capture/server/api/contract"
)

func newWaitCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "wait email|request",
		Short: "Wait for one email or webhook from a script, and print a part of it",
		Long: `wait holds until an email (or a webhook request) that matches the filters arrives,
prints the part asked for on stdout, alone, and exits 0. Only captures received
after the command started count, unless --since says otherwise, so a re-run
never picks up the previous run's email. The oldest match is the one printed.

Exit codes: 0 found and printed; 1 nothing arrived within --timeout (default
30s, longer waits are fine; however short, what is there is looked at once);
2 usage or configuration error (bad flag, no key, unknown inbox, API not
running); 3 the capture arrived but has no such part (no matching link, no
code), its id named on stderr.

It works over the read API, against a local or a remote serve. The API key comes
from $CAPTURE_API_KEY, else $CAPTURE_KEY, else credentials.json in the data dir;
--api defaults from the same file.`,
		Example: `  capture wait email --to alice@example.com --print link --kind verify
  capture wait email --subject "sign-in code" --print code --timeout 2m
  capture wait request --path /ci/$RUN_ID/ --method POST --print body | jq .`,
		// Without what to wait for, a script gets the usage exit code (2)
		// its wait documents, not the help and 0 of the other groups.
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], c.CommandPath())
			}
			return usagef("wait for what? %q or %q", "email", "request")
		},
	}
	email := &cobra.Command{
		Use:   "email",
		Short: "Wait for an email and print its id, subject, text, html, link, code or JSON",
		Example: `  capture wait email --to alice@example.com
  capture wait email --to alice@example.com --print link --match /confirm --kind verify
  capture wait email --inbox signup --subject "Your code" --print code --since 10m`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runWait(c, wait.Email) },
	}
	f := email.Flags()
	f.String("inbox", "", "inbox id or name (default: the project's only inbox, else the one named default)")
	f.String("to", "", "recipient contains (envelope, To, Cc; case-insensitive)")
	f.String("from", "", "sender contains (envelope, From name or address)")
	f.String("subject", "", "subject contains (case-insensitive)")
	f.String("print", wait.EmailParts[0], "what to print: "+strings.Join(wait.EmailParts, ", "))
	f.String("match", "", "with --print link: the link's URL contains this")
	f.String("kind", "", "with --print link: the link's kind, one of "+strings.Join(contract.LinkKinds, ", "))

	request := &cobra.Command{
		Use:   "request",
		Short: "Wait for a webhook request and print its id, path, body or JSON",
		Example: `  capture wait request --path /ci/42/
  capture wait request --endpoint stripe --method POST --print body`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runWait(c, wait.Request) },
	}
	f = request.Flags()
	f.String("endpoint", "", "endpoint id or name (default: the project's only endpoint, else the one named default)")
	f.String("method", "", "HTTP method (exact, case-insensitive)")
	f.String("path", "", "captured path starts with this")
	f.String("print", wait.RequestParts[0], "what to print: "+strings.Join(wait.RequestParts, ", "))

	for _, sub := range []*cobra.Command{email, request} {
		f := sub.Flags()
		f.String("q", "", "full-text search: words anywhere in the capture, \"quoted phrases\"")
		f.String("since", "", "only captures received after this RFC 3339 time, or this long ago (10m) (default: the start)")
		f.Duration("timeout", wait.DefaultTimeout, "how long to wait (longer than 30s is fine)")
		apiFlag(sub)
	}
	c.AddCommand(email, request)
	return c
}

func runWait(c *cobra.Command, kind string) error {
	start := started.Launched()
	f := c.Flags()
	str := func(name string) string {
		v, _ := f.GetString(name)
		return v
	}
	cfg := wait.Config{
		Kind: kind, Q: str("q"), Print: str("print"), Start: start, Stdout: c.OutOrStdout(),
	}
	cfg.Timeout, _ = f.GetDuration("timeout")
	if kind == wait.Email {
		cfg.Source, cfg.To, cfg.From, cfg.Subject = str("inbox"), str("to"), str("from"), str("subject")
		cfg.Match, cfg.LinkKind = str("match"), str("kind")
	} else {
		cfg.Source, cfg.Method, cfg.Path = str("endpoint"), str("method"), str("path")
	}
	if s := str("since"); s != "" {
		since, err := wait.ParseSince(s, start)
		if err != nil {
			return usageError{err}
		}
		cfg.Since = since
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	client, err := apiClient(c)
	if err != nil {
		return err
	}
	cfg.Client = client
	cfg.RefusedKey = refusedKey(c)
	err = wait.Run(c.Context(), cfg)
	var we *wait.Error
	if errors.As(err, &we) {
		return exitError{code: we.Code, err: we.Err}
	}
	return err
}
