package forward

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capturedev/capture/forward/termtext"
	"github.com/capturedev/capture/server/api/contract"
)

// printer shows what the forwarder does: as lines for a person, or as
// NDJSON for scripts and agents. Warnings and status lines go to stderr in
// both cases, so stdout stays parseable.
type printer interface {
	ready(readyInfo)
	delivery(result)
	warn(format string, args ...any)
	info(format string, args ...any)
	summary(s stats, ran time.Duration)
}

type readyInfo struct {
	Time         time.Time
	API          string
	Project      string
	Endpoint     string
	EndpointName string
	CaptureURL   string
	To           string
	Baseline     string
	ReplayLast   int
	Interval     time.Duration
}

// ColorFor reports whether w is a terminal that should get colours: a
// character device, and NO_COLOR unset.
func ColorFor(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

type textPrinter struct {
	w, errw io.Writer
	color   bool
}

func (p *textPrinter) paint(code, s string) string {
	if !p.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (p *textPrinter) ready(r readyInfo) {
	row := func(k, v string) { fmt.Fprintf(p.w, "  %-9s %s\n", k, v) }
	fmt.Fprintf(p.w, "%s %s → %s\n", p.paint(ansiBold, "Forwarding"), r.Endpoint, r.To)
	row("API", fmt.Sprintf("%s (project %s)", r.API, r.Project))
	if r.CaptureURL != "" {
		row("Capture", r.CaptureURL+"/…")
	}
	if r.Baseline != "" {
		row("Baseline", r.Baseline+" (requests captured after it are forwarded)")
	} else {
		row("Baseline", "none yet (the endpoint is empty; every new request is forwarded)")
	}
	if r.ReplayLast > 0 {
		row("Replay", fmt.Sprintf("the %d newest existing first", r.ReplayLast))
	}
	row("Interval", fmt.Sprintf("every %s", r.Interval))
	fmt.Fprintln(p.w, "Press Ctrl-C to stop.")
}

func (p *textPrinter) delivery(r result) {
	var outcome string
	switch {
	case r.Err != nil:
		outcome = fmt.Sprintf("%s %s: %s", p.paint(ansiRed, r.Class), formatMS(r.Duration), termtext.Visible(r.ErrText))
	default:
		outcome = fmt.Sprintf("%s %s %s", p.paint(statusColor(r.Status), termtext.Visible(r.Reason)), formatMS(r.Duration), formatBytes(r.Bytes))
	}
	// The method and path are the sender's, the reason the handler's:
	// shown, never acted on by the terminal.
	fmt.Fprintf(p.w, "%s %s %s %s → %s\n", p.paint(ansiDim, r.At.Format("15:04:05")), r.ID,
		termtext.Visible(r.Method), termtext.Visible(r.Target), outcome)
}

func statusColor(status int) string {
	switch {
	case status >= 500:
		return ansiRed
	case status >= 400:
		return ansiYellow
	case status >= 300:
		return ansiCyan
	}
	return ansiGreen
}

func (p *textPrinter) warn(format string, args ...any) {
	fmt.Fprintf(p.errw, "%s %s\n", p.paint(ansiYellow, "warning:"), fmt.Sprintf(format, args...))
}

func (p *textPrinter) info(format string, args ...any) {
	fmt.Fprintf(p.errw, "%s\n", fmt.Sprintf(format, args...))
}

func (p *textPrinter) summary(s stats, ran time.Duration) {
	fmt.Fprintf(p.w, "Stopped after %s: %d forwarded (%d answered 2xx, %d answered another status, %d got no answer).\n",
		ran.Round(time.Second), s.Deliveries, s.OK, s.Non2xx, s.Errors)
}

// jsonPrinter writes one object per line: "ready" once, then "delivery"
// per delivery, then "summary" on stop.
type jsonPrinter struct {
	w, errw io.Writer
}

// emit writes v as one line of JSON, with what a terminal would act on
// (a sender's C1 controls, bidi overrides) as \u escapes: the same JSON
// to a program, and harmless to a terminal it is shown on.
func (p *jsonPrinter) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	p.w.Write(append(termtext.VisibleJSON(b), '\n'))
}

func (p *jsonPrinter) ready(r readyInfo) {
	var baseline *string
	if r.Baseline != "" {
		baseline = &r.Baseline
	}
	p.emit(struct {
		Type       string  `json:"type"`
		Time       string  `json:"time"`
		API        string  `json:"api"`
		Project    string  `json:"project"`
		Endpoint   string  `json:"endpoint"`
		CaptureURL string  `json:"capture_url"`
		To         string  `json:"to"`
		Baseline   *string `json:"baseline"`
		ReplayLast int     `json:"replay_last"`
		Interval   int     `json:"interval_s"`
	}{"ready", contract.FormatTime(r.Time), r.API, r.Project, r.Endpoint, r.CaptureURL, r.To, baseline,
		r.ReplayLast, int(r.Interval / time.Second)})
}

func (p *jsonPrinter) delivery(r result) {
	var status *int
	var errText, class *string
	if r.Err != nil {
		errText, class = &r.ErrText, &r.Class
	} else {
		status = &r.Status
	}
	p.emit(struct {
		Type       string  `json:"type"`
		Time       string  `json:"time"`
		RequestID  string  `json:"request_id"`
		Method     string  `json:"method"`
		Path       string  `json:"path"`
		URL        string  `json:"url"`
		Status     *int    `json:"status"`
		Error      *string `json:"error"`
		ErrorClass *string `json:"error_class"`
		DurationMS int64   `json:"duration_ms"`
		Bytes      int     `json:"bytes"`
	}{"delivery", contract.FormatTime(r.At), r.ID, r.Method, r.Target, r.URL, status, errText, class,
		r.Duration.Milliseconds(), r.Bytes})
}

func (p *jsonPrinter) warn(format string, args ...any) {
	fmt.Fprintf(p.errw, "warning: %s\n", fmt.Sprintf(format, args...))
}

func (p *jsonPrinter) info(format string, args ...any) {
	fmt.Fprintf(p.errw, "%s\n", fmt.Sprintf(format, args...))
}

func (p *jsonPrinter) summary(s stats, ran time.Duration) {
	p.emit(struct {
		Type       string `json:"type"`
		Time       string `json:"time"`
		Deliveries int    `json:"deliveries"`
		OK         int    `json:"ok"`
		Non2xx     int    `json:"non_2xx"`
		Errors     int    `json:"errors"`
		DurationMS int64  `json:"duration_ms"`
	}{"summary", contract.FormatTime(time.Now()), s.Deliveries, s.OK, s.Non2xx, s.Errors, ran.Milliseconds()})
}

func formatMS(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// formatBytes prints a size the way the delivery line shows it: "512 B",
// "1.0 KiB", "2.5 MiB".
func formatBytes(n int) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	units := []string{"KiB", "MiB", "GiB"}
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return strings.TrimSpace(fmt.Sprintf("%.1f %s", v, units[i]))
}
