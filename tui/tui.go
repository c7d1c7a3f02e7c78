// Package tui is `capture tui`: a live terminal viewer of captured email and
// webhook requests, built with bubbletea over the read API, so that it
// watches a remote server as well as a local one.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// Config is what the viewer runs with. Only Client is required.
type Config struct {
	Client *apiclient.Client
	// Input and Output are the terminal; nil means stdin and stdout.
	Input  io.Reader
	Output io.Writer
	// Renderer styles the screen; nil means one for Output, which detects
	// the terminal's colours and honours NO_COLOR.
	Renderer *lipgloss.Renderer
	// SaveDir receives saved attachments; "" means the working directory.
	SaveDir string
	// OpenURL opens a link in a browser; nil means xdg-open, open or start,
	// whichever the system has.
	OpenURL func(url string) error
	// Location is the zone capture times are shown in; nil means local time.
	Location *time.Location
	// RefusedKey, if set, is what to say of a key the API refuses: where
	// it came from and how to get one that works.
	RefusedKey string
}

// StartError means the viewer could not start: no usable key, a URL that
// is not the read API, or no terminal; or that the API refused the key
// later on (revoked while the viewer ran), which ends it the same way. The
// command exits with 2 for it.
// An API that does not answer yet is no StartError: the viewer waits for
// it, and its first answer, if a refusal, is.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Run checks the key against the API, then shows the viewer until the user
// quits or ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		return errors.New("tui: no API client")
	}
	checkCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := cfg.Client.Me(checkCtx)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	// A server that does not answer yet may be starting beside the viewer
	// (a split terminal, compose up): the viewer starts anyway and says so
	// in its status line until the API answers. A refusal is the user's to
	// fix, now.
	if err != nil && !answersLater(err) {
		return &StartError{Err: startProblem(cfg.Client.BaseURL(), cfg.RefusedKey, err)}
	}
	if cfg.Output == nil {
		cfg.Output = os.Stdout
	}
	if f, ok := cfg.Output.(*os.File); !ok || !term.IsTerminal(f.Fd()) {
		return &StartError{Err: errors.New("tui needs a terminal: standard output is not one")}
	}
	if cfg.Renderer == nil {
		cfg.Renderer = lipgloss.NewRenderer(cfg.Output)
	}
	// Both are asked of the terminal, whose answers must arrive before the
	// program starts reading the keyboard, or they are lost and each
	// question waits out its timeout.
	cfg.Renderer.ColorProfile()
	cfg.Renderer.HasDarkBackground()
	m := NewModel(ctx, cfg)
	m.unchecked = err != nil
	defer m.stop()
	// Bubble Tea's own signal handler would race the caller's (both catch
	// SIGTERM) and can hang the program on its way out, and a cancelled
	// context kills the program without restoring the terminal. Instead,
	// the end of ctx and SIGHUP (the terminal closed) quit as q does.
	opts := []tea.ProgramOption{tea.WithoutSignalHandler(), tea.WithOutput(cfg.Output), tea.WithAltScreen()}
	if cfg.Input != nil {
		opts = append(opts, tea.WithInput(cfg.Input))
	}
	p := tea.NewProgram(m, opts...)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ran := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-hup:
		case <-ran:
			return
		}
		p.Quit() // a no-op once the program has ended
	}()
	_, err = p.Run()
	close(ran)
	if m.startErr != nil {
		return m.startErr
	}
	return err
}

// answersLater reports whether err may go away by itself: no answer from
// the API yet, or one that asks to come back later.
func answersLater(err error) bool {
	_, later := apiclient.RetryAfter(err)
	return later || errors.Is(err, apiclient.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded)
}

// startProblem says in one line what to fix.
func startProblem(api, refusedKey string, err error) error {
	var ae *contract.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized && refusedKey != "":
		return fmt.Errorf("the API at %s refused %s", api, refusedKey)
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		return fmt.Errorf("the API at %s refused the key: %s (check %s, %s or credentials.json)",
			api, ae.Message, apiclient.EnvAPIKey, apiclient.EnvKey)
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return fmt.Errorf("%s does not serve the read API (want a URL ending in /api/v1): %w", api, err)
	}
	return fmt.Errorf("the API at %s: %w", api, err)
}
