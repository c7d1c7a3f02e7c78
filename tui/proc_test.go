//go:build linux

package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
)

// The viewer as a process of its own: the test binary runs
// TestViewerProcess when these are set, the way main runs the command
// (a context ended by SIGINT and SIGTERM, exit status 2 for a StartError).
const (
	envProcAPI = "CAPTURE_TUI_TEST_API"
	envProcKey = "CAPTURE_TUI_TEST_KEY"
	envProcPID = "CAPTURE_TUI_TEST_PIDFILE"
)

func TestViewerProcess(t *testing.T) {
	api := os.Getenv(envProcAPI)
	if api == "" {
		t.Skip("run by the tmux tests as the viewer's process")
	}
	if err := os.WriteFile(os.Getenv(envProcPID), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, Config{
		Client:   apiclient.New(api, os.Getenv(envProcKey), nil),
		Location: time.UTC,
		SaveDir:  os.TempDir(),
		OpenURL:  func(string) error { return errors.New("no browser here") },
	})
	stop()
	var se *StartError
	switch {
	case errors.As(err, &se):
		fmt.Fprintf(os.Stderr, "capture: %v\n", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "capture: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func (s *tmuxServer) format(f string) string {
	s.t.Helper()
	return strings.TrimSpace(s.run("display-message", "-p", f))
}

// startViewer runs the viewer in the pane against e's API, its standard
// error going to the file it returns. A shell waits for it and keeps its
// exit status, which tmux, reaping late under load, does not always have.
func (s *tmuxServer) startViewer(e *env, key string) string {
	s.t.Helper()
	s.n++
	s.stderr = filepath.Join(s.dir, "stderr"+strconv.Itoa(s.n))
	s.status = filepath.Join(s.dir, "status"+strconv.Itoa(s.n))
	s.pidFile = filepath.Join(s.dir, "pid"+strconv.Itoa(s.n))
	script := filepath.Join(s.dir, "viewer"+strconv.Itoa(s.n)+".sh")
	body := fmt.Sprintf("#!/bin/sh\nexport %s=%q %s=%q %s=%q LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color\n%q -test.run='^TestViewerProcess$' 2>%q\necho $? >%q.new && mv %q.new %q\n",
		envProcAPI, e.client.BaseURL(), envProcKey, key, envProcPID, s.pidFile, os.Args[0], s.stderr, s.status, s.status, s.status)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		s.t.Fatal(err)
	}
	s.run("respawn-pane", "-k", script)
	return s.stderr
}

// pid is the process id of the viewer started last, once it runs.
func (s *tmuxServer) pid() int {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(s.pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
	}
	s.t.Fatal("the viewer never started")
	return 0
}

// screen is what the pane shows.
func (s *tmuxServer) screen() string {
	s.t.Helper()
	return s.run("capture-pane", "-p")
}

func (s *tmuxServer) waitText(want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = s.screen()
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(got, w)
		}
		if !missing {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("the pane never showed %q; it shows:\n%s", want, got)
	return ""
}

// waitExit waits for the viewer to end and returns its exit status, or
// fails the test, with the pane's screen, if it does not.
func (s *tmuxServer) waitExit() int {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(s.status)
		if err != nil {
			continue
		}
		st, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			s.t.Fatal(err)
		}
		return st
	}
	s.t.Fatalf("the viewer did not exit; the pane shows:\n%s", s.screen())
	return 0
}

// record copies what the pane's process writes from now on into a file,
// whose contents the returned function reads.
func (s *tmuxServer) record() func() string {
	s.t.Helper()
	s.n++
	file := filepath.Join(s.dir, "out"+strconv.Itoa(s.n))
	s.run("pipe-pane", "cat > "+file)
	return func() string {
		// tmux hands output to the pipe after the pane: wait a little for
		// the terminal to be given back before reading.
		var b []byte
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, _ = os.ReadFile(file); strings.Contains(string(b), "\x1b[?1049l") {
				break
			}
		}
		return string(b)
	}
}

// checkRestored fails the test unless the pane left the alternate screen
// and the viewer showed the cursor again (tmux hides the cursor of a dead
// pane, so that is read in what the viewer wrote).
func (s *tmuxServer) checkRestored(what, out string) {
	s.t.Helper()
	if s.format("#{alternate_on}") != "0" {
		s.t.Errorf("%s: the pane is left in the alternate screen", what)
	}
	if strings.LastIndex(out, "\x1b[?25h") < strings.LastIndex(out, "\x1b[?25l") || !strings.Contains(out, "\x1b[?25h") {
		s.t.Errorf("%s: the cursor is left hidden", what)
	}
}
