// Package wait is `capture wait`: it waits, over the read API, for one
// email or webhook request that arrives after it started, and prints the
// part of it a script asked for, with exit codes a script can branch on.
// Waits longer than the API's 30 s are chained long-polls.
package wait

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/termtext"
	"github.com/capturedev/capture/server/api/contract"
)

// What to wait for.
const (
	Email   = "email"
	Request = "request"
)

// The parts --print takes, by kind; the first is the default.
var (
	EmailParts   = []string{"id", "subject", "text", "html", "link", "code", "json"}
	RequestParts = []string{"id", "path", "body", "json"}
)

// DefaultTimeout is how long a wait lasts unless told otherwise.
const DefaultTimeout = 30 * time.Second

// Exit codes, for scripts to branch on.
const (
	ExitFound    = 0
	ExitTimedOut = 1
	// ExitUsage is also a configuration that cannot work: no key, an
	// unknown inbox, an API that does not answer.
	ExitUsage = 2
	// ExitNoPart: the capture arrived but has no such part.
	ExitNoPart = 3
)

// Error is a wait that printed nothing; Code is its exit code and the
// message says why in one line.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(code int, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// Config is what `capture wait email|request` was asked for.
type Config struct {
	Client *apiclient.Client
	// Kind is Email or Request.
	Kind string
	// Source is the inbox (Email) or endpoint (Request), by id or name;
	// "" means the project's only one, else the one named "default".
	Source string

	To, From, Subject string // Email filters (substrings)
	Method, Path      string // Request filters (exact method, path prefix)
	// Q is a full-text search (SPEC §16), for either kind.
	Q string

	// Since keeps captures received strictly after it; zero means those
	// received from Start on.
	Since time.Time
	// Start is when the wait began; zero means now.
	Start   time.Time
	Timeout time.Duration

	// Print is the part to print: one of EmailParts or RequestParts.
	Print string
	// Match and LinkKind choose the link --print link prints: its URL
	// contains Match, and it is of kind LinkKind.
	Match, LinkKind string

	Stdout io.Writer
	// RefusedKey is what to say when the API refuses the key: where it
	// came from and how to get one that works. "" says to set
	// CAPTURE_API_KEY.
	RefusedKey string

	finder Finder
	// onTerminal is whether Stdout is a terminal, where captured text is
	// shown Visible; into a pipe or a file it is written byte for byte.
	onTerminal bool
}

// durationSyntax is what time.ParseDuration reads. A value written so
// that it still refuses is too long for a time.Duration, which its error
// does not tell from a typo.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// MaxSinceBack is the furthest back --since reaches as a duration: the
// longest time.Duration, in whole hours (about 292 years). An RFC 3339
// time reaches further.
const MaxSinceBack = time.Duration(math.MaxInt64) / time.Hour * time.Hour

// ParseSince reads --since: an RFC 3339 time with a zone, or a duration
// back from now ("10m").
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	switch {
	case err == nil && d > 0 && d <= MaxSinceBack:
		return now.Add(-d), nil
	case err == nil && d <= 0, strings.HasPrefix(s, "-") && durationSyntax.MatchString(s):
		return time.Time{}, fmt.Errorf("--since %q: want a duration back from now greater than zero", s)
	case err == nil, durationSyntax.MatchString(s):
		years := int(MaxSinceBack.Hours() / (365.2425 * 24))
		return time.Time{}, fmt.Errorf("--since %q: too far back: a duration back is at most %s (about %d years); "+
			"an RFC 3339 time (1700-01-01T00:00:00Z) reaches further", s, formatDuration(MaxSinceBack), years)
	}
	t, err := contract.ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time with a zone (2026-01-02T15:04:05Z) or a duration back (10m)", s)
	}
	if t.IsZero() {
		// 0001-01-01T00:00:00Z is Config's "no --since" (from the start
		// on); nothing was captured in its first nanosecond, so the one
		// after keeps the same captures.
		t = t.Add(time.Nanosecond)
	}
	return t, nil
}

// Validate checks the settings that need no API call; its errors are
// usage errors.
func (c *Config) Validate() error {
	parts := EmailParts
	switch c.Kind {
	case Email:
		if c.Method != "" || c.Path != "" {
			return errors.New("--method and --path filter requests, not email")
		}
	case Request:
		parts = RequestParts
		if c.To != "" || c.From != "" || c.Subject != "" {
			return errors.New("--to, --from and --subject filter email, not requests")
		}
	default:
		return fmt.Errorf("wait for %q: want email or request", c.Kind)
	}
	if c.Print == "" {
		c.Print = parts[0]
	}
	if !slices.Contains(parts, c.Print) {
		return fmt.Errorf("--print %q: want one of %s", c.Print, strings.Join(parts, ", "))
	}
	if (c.Match != "" || c.LinkKind != "") && c.Print != "link" {
		return errors.New("--match and --kind choose a link: use them with --print link")
	}
	if c.LinkKind != "" && !slices.Contains(contract.LinkKinds, c.LinkKind) {
		return fmt.Errorf("--kind %q: want one of %s", c.LinkKind, strings.Join(contract.LinkKinds, ", "))
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: want a duration greater than zero", c.Timeout)
	}
	return nil
}

// Run waits and prints the part asked for on Stdout. Every failure is an
// *Error with its exit code, but a usage error from Validate.
func Run(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Client == nil {
		return errors.New("no API client")
	}
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	if c.Since.IsZero() {
		c.Since = SinceStart(c.Start)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	c.onTerminal = termtext.IsTerminal(c.Stdout)
	c.finder.Client = c.Client
	// --timeout bounds the waiting, not the calls: the inbox or endpoint
	// is still resolved, and what is there already looked at, when it is
	// shorter than a round trip (1ms); it then ends as any wait that
	// found nothing, with exit 1.
	c.finder.Until = c.Start.Add(c.Timeout)
	if c.Kind == Email {
		return c.email(ctx)
	}
	return c.request(ctx)
}

// callGrace is how long the API has to answer a call, past the end of the
// wait when the call is made at the last moment (or after a --timeout
// shorter than a round trip): the inbox is still resolved, what is there
// still looked at, and a capture that arrived at the last moment still
// printed.
const callGrace = 10 * time.Second

func (c *Config) email(ctx context.Context) error {
	callCtx, cancel := context.WithDeadline(ctx, c.finder.Until.Add(callGrace))
	defer cancel()
	inbox, err := resolve(callCtx, c, "inbox", c.Client.Inboxes, func(in contract.Inbox) (string, string) { return in.ID, in.Name })
	if _, later := apiclient.RetryAfter(err); later {
		return c.waitFailed(callCtx, err, "email", c.emailFilters(c.Source))
	}
	if err != nil {
		return err
	}
	m, err := c.finder.NextMessage(callCtx, inbox.ID, apiclient.MessageQuery{
		To: c.To, From: c.From, Subject: c.Subject, Q: c.Q, Since: c.Since})
	if err != nil {
		return c.waitFailed(callCtx, err, "email", c.emailFilters(inbox.Name))
	}
	partCtx, cancel := context.WithTimeout(ctx, callGrace)
	defer cancel()
	return c.printEmail(partCtx, m)
}

func (c *Config) request(ctx context.Context) error {
	callCtx, cancel := context.WithDeadline(ctx, c.finder.Until.Add(callGrace))
	defer cancel()
	ep, err := resolve(callCtx, c, "endpoint", c.Client.Endpoints, func(e contract.Endpoint) (string, string) { return e.ID, e.Name })
	if _, later := apiclient.RetryAfter(err); later {
		return c.waitFailed(callCtx, err, "request", c.requestFilters(c.Source))
	}
	if err != nil {
		return err
	}
	r, err := c.finder.NextRequest(callCtx, ep.ID, apiclient.RequestQuery{Method: c.Method, Path: c.Path, Q: c.Q, Since: c.Since})
	if err != nil {
		return c.waitFailed(callCtx, err, "request", c.requestFilters(ep.Name))
	}
	partCtx, cancel := context.WithTimeout(ctx, callGrace)
	defer cancel()
	return c.printRequest(partCtx, r)
}

// resolve finds the inbox or endpoint Source names, by id or name, or the
// default one.
func resolve[T any](ctx context.Context, c *Config, what string, list func(context.Context, apiclient.Page) (contract.List[T], error),
	idName func(T) (string, string)) (T, error) {
	var zero T
	// Unlike the calls of the wait itself, an API that does not answer
	// here is not retried: a wrong --api or a serve not running should
	// say so at once.
	// An API that answers "later" (503 with the database down, 429) is
	// asked again until the wait's own end, not past it: the wait then
	// ends as one that found nothing, with the API's last answer saying
	// why (email and request hand it to waitFailed).
	retryCtx, cancel := context.WithDeadline(ctx, c.finder.Until)
	defer cancel()
	all, err := retryUntil(ctx, retryCtx, func(ctx context.Context) ([]T, error) { return apiclient.All(ctx, list) })
	if _, later := apiclient.RetryAfter(err); later {
		return zero, err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = ErrTimedOut
	}
	var ae *contract.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		// The read API lists inboxes and endpoints at any key: a 404 here
		// is a URL that is some other listener (the capture URL, say).
		return zero, fail(ExitUsage, "%s does not serve the read API (want a URL ending in /api/v1): %v", c.Client.BaseURL(), err)
	}
	if err != nil {
		return zero, c.apiFailed(err, "list the "+plural(what))
	}
	var choices, named []string
	var found T
	for _, v := range all {
		id, name := idName(v)
		if id == c.Source {
			return v, nil
		}
		if name == c.Source {
			found = v
			named = append(named, id)
		}
		choices = append(choices, id+" ("+name+")")
	}
	switch {
	case c.Source == "":
	case len(named) == 1:
		return found, nil
	case len(named) > 1:
		// Names need not be unique: watching one of them could wait on
		// the wrong one.
		return zero, fail(ExitUsage, "%d %s are named %q: pass --%s with the id of one (%s)",
			len(named), plural(what), c.Source, what, strings.Join(named, ", "))
	default:
		return zero, fail(ExitUsage, "no %s %q in this key's project (`capture %s list` shows them)", what, c.Source, what)
	}
	if v, ok := DefaultOf(all, func(v T) string { _, name := idName(v); return name }); ok {
		return v, nil
	}
	if len(all) == 0 {
		return zero, fail(ExitUsage, "the project has no %s (`capture %s create` makes one)", what, what)
	}
	return zero, fail(ExitUsage, "the project has %d %s and no single one named default: pass --%s (one of %s)",
		len(all), plural(what), what, strings.Join(choices, ", "))
}

// plural is the plural of "inbox" or "endpoint".
func plural(noun string) string {
	if strings.HasSuffix(noun, "x") {
		return noun + "es"
	}
	return noun + "s"
}

// DefaultOf is the one of all a wait takes when none is named (SPEC §14):
// the only one, else the one named default; false when there is neither,
// or when several are named default (names need not be unique), rather
// than a guess that may watch the wrong one.
func DefaultOf[T any](all []T, name func(T) string) (T, bool) {
	var found T
	if len(all) == 1 {
		return all[0], true
	}
	n := 0
	for _, v := range all {
		if name(v) == "default" {
			found = v
			n++
		}
	}
	if n != 1 {
		var zero T
		return zero, false
	}
	return found, true
}

// apiFailed turns an API error met while setting up into an exit code 2.
func (c *Config) apiFailed(err error, doing string) error {
	var ae *contract.Error
	switch {
	case errors.Is(err, ErrTimedOut):
		return fail(ExitTimedOut, "%s: the API at %s did not answer in time", doing, c.Client.BaseURL())
	case errors.Is(err, apiclient.ErrUnreachable):
		return fail(ExitUsage, "%v (is `capture serve` running? --api sets the URL)", err)
	case contract.IsCode(err, contract.CodeUnauthorized):
		if c.RefusedKey != "" {
			return fail(ExitUsage, "the API at %s refused %s", c.Client.BaseURL(), c.RefusedKey)
		}
		return fail(ExitUsage, "the API at %s refused the key (unknown or revoked): set %s to a valid key",
			c.Client.BaseURL(), apiclient.EnvAPIKey)
	case errors.As(err, &ae):
		return fail(ExitUsage, "%s: %v", doing, err)
	}
	return &Error{Code: ExitUsage, Err: err}
}

// waitFailed says what did not arrive, or why the wait could not go on.
func (c *Config) waitFailed(ctx context.Context, err error, noun, filters string) error {
	msg := fmt.Sprintf("no %s%s within %s", noun, filters, formatDuration(c.Timeout))
	switch {
	case errors.Is(err, ErrTimedOut):
		if errors.Is(err, apiclient.ErrUnreachable) {
			// Retried to the deadline, so that a serve that restarts is
			// waited through; one still down then cannot say that nothing
			// arrived: that is exit 2's "the API not answering".
			return fail(ExitUsage, "%s: the API stopped answering (%v); is `capture serve` running?", msg, errors.Unwrap(err))
		}
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail(ExitTimedOut, "interrupted: no %s%s arrived", noun, filters)
	default:
		// The API's last answer when the wait ended asked to come back
		// later (too_many_waits, unavailable): the wait timed out, and
		// that answer says why nothing was seen.
		if _, later := apiclient.RetryAfter(err); !later {
			return c.apiFailed(err, "wait for the "+noun)
		}
		msg += " (the API was busy: " + err.Error() + ")"
	}
	return &Error{Code: ExitTimedOut, Err: errors.New(msg)}
}

func (c *Config) emailFilters(inbox string) string {
	var b strings.Builder
	if c.To != "" {
		b.WriteString(" to " + c.To)
	}
	if c.From != "" {
		b.WriteString(" from " + c.From)
	}
	if c.Subject != "" {
		b.WriteString(" with subject containing " + strconv.Quote(c.Subject))
	}
	c.commonFilters(&b, "inbox "+inbox)
	return b.String()
}

func (c *Config) requestFilters(endpoint string) string {
	var b strings.Builder
	if c.Method != "" {
		b.WriteString(" " + strings.ToUpper(c.Method))
	}
	if c.Path != "" {
		b.WriteString(" under " + c.Path)
	}
	c.commonFilters(&b, "endpoint "+endpoint)
	return b.String()
}

func (c *Config) commonFilters(b *strings.Builder, source string) {
	if c.Q != "" {
		b.WriteString(" matching " + strconv.Quote(c.Q))
	}
	if c.Source != "" {
		b.WriteString(" in " + source)
	}
}

// formatDuration writes 30s, 2m, 1m30s, 1h rather than 2m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (c *Config) printEmail(ctx context.Context, m contract.MessageSummary) error {
	noPart := func(what string) error {
		return fail(ExitNoPart, "%s arrived but has no %s", m.ID, what)
	}
	switch c.Print {
	case "id":
		return c.line(m.ID)
	case "subject":
		return c.line(oneLine(m.Subject))
	case "json":
		return c.printWhole(ctx, m.ID, c.Client.MessageJSON)
	case "link":
		links, err := call(ctx, &c.finder, func(ctx context.Context) ([]contract.Link, error) {
			list, err := c.Client.MessageLinks(ctx, m.ID, apiclient.LinkQuery{Match: c.Match, Kind: c.LinkKind})
			return list.Items, err
		})
		if err != nil {
			return c.partFailed(err, m.ID)
		}
		if len(links) == 0 {
			what := "link"
			if c.LinkKind != "" {
				what += " of kind " + c.LinkKind
			}
			if c.Match != "" {
				what += " matching " + strconv.Quote(c.Match)
			}
			return noPart(what)
		}
		return c.line(links[0].URL)
	}
	full, err := call(ctx, &c.finder, func(ctx context.Context) (contract.Message, error) { return c.Client.Message(ctx, m.ID) })
	if err != nil {
		return c.partFailed(err, m.ID)
	}
	switch c.Print {
	case "text":
		if full.Body.Text == nil {
			return noPart("text body")
		}
		return c.text(*full.Body.Text)
	case "html":
		if full.Body.HTML == nil {
			return noPart("HTML body")
		}
		return c.text(*full.Body.HTML)
	default: // code
		if len(full.Codes) == 0 {
			return noPart("verification code")
		}
		return c.line(full.Codes[0].Value)
	}
}

func (c *Config) printRequest(ctx context.Context, r contract.RequestSummary) error {
	switch c.Print {
	case "id":
		return c.line(r.ID)
	case "path":
		return c.line(r.Path)
	case "json":
		return c.printWhole(ctx, r.ID, c.Client.RequestJSON)
	}
	full, err := call(ctx, &c.finder, func(ctx context.Context) (contract.Request, error) { return c.Client.Request(ctx, r.ID) })
	if err != nil {
		return c.partFailed(err, r.ID)
	}
	body, err := full.BodyBytes()
	if err != nil {
		return &Error{Code: ExitUsage, Err: err}
	}
	// The body byte for byte, so that `> file` keeps it whole (a signature
	// over it still checks); on a terminal it is shown Visible, and ends
	// its line, or the shell's prompt would run on after it.
	if c.onTerminal && len(body) > 0 {
		return c.text(string(body))
	}
	_, err = c.Stdout.Write(body)
	return err
}

// printWhole prints a capture as the API wrote it, every field kept.
func (c *Config) printWhole(ctx context.Context, id string, fetch func(context.Context, string) (json.RawMessage, error)) error {
	raw, err := call(ctx, &c.finder, func(ctx context.Context) (json.RawMessage, error) { return fetch(ctx, id) })
	if err != nil {
		return c.partFailed(err, id)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return &Error{Code: ExitUsage, Err: fmt.Errorf("the API's answer is not JSON: %w", err)}
	}
	buf.WriteByte('\n')
	out := buf.Bytes()
	if c.onTerminal {
		out = termtext.VisibleJSON(out)
	}
	_, err = c.Stdout.Write(out)
	return err
}

// partFailed reports a capture that arrived but could not be read: deleted
// at once (exit 3, its id named), or an API failure.
func (c *Config) partFailed(err error, id string) error {
	if contract.IsCode(err, contract.CodeNotFound) {
		return fail(ExitNoPart, "%s arrived but was deleted before it could be read", id)
	}
	return c.apiFailed(err, "read "+id)
}

// oneLine keeps a value on the one line SPEC §14 promises: a subject may
// carry line breaks and other controls from its encoded words
// (=?utf-8?Q?a=0Ab?=), which would otherwise split it in a script's
// $(…). Each run of them between words becomes one space; tabs stay.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, breaksLine) {
		return s
	}
	var b strings.Builder
	gap := false
	for _, r := range s {
		if breaksLine(r) {
			gap = true
			continue
		}
		if gap && b.Len() > 0 {
			b.WriteByte(' ')
		}
		gap = false
		b.WriteRune(r)
	}
	return b.String()
}

func breaksLine(r rune) bool {
	return r != '\t' && unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// line writes s and a newline: as it is into a pipe or a file, Visible
// on a terminal.
func (c *Config) line(s string) error {
	if c.onTerminal {
		s = termtext.Visible(s)
	}
	_, err := io.WriteString(c.Stdout, s+"\n")
	return err
}

// text writes a body as it is into a pipe or a file, Visible on a
// terminal, ending in a newline.
func (c *Config) text(s string) error {
	if c.onTerminal {
		s = termtext.Visible(s)
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, err := io.WriteString(c.Stdout, s)
	return err
}
