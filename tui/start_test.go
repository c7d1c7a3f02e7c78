//go:build linux

package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capturedev/capture/forward/apiclient"
)

// ptyRun is Run on a pseudo-terminal of 80×24, as `capture tui` runs in a
// terminal; screen has everything it drew so far.
type ptyRun struct {
	t      *testing.T
	master *os.File
	screen syncBuffer
	done   chan error
}

func runOnPTY(t *testing.T, cfg Config) *ptyRun {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	rc, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		if n, ctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN); ctlErr != nil {
			return
		}
		if ctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ctlErr != nil {
			return
		}
		ctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	}); err != nil || ctlErr != nil {
		t.Fatal(err, ctlErr)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, master: master, done: make(chan error, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	cfg.Input, cfg.Output = tty, tty
	go func() { p.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return once its context ended")
		}
		tty.Close()
		master.Close()
		<-read
	})
	return p
}

// waitText waits until the terminal has been shown every one of want.
func (p *ptyRun) waitText(want ...string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s := p.screen.String()
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(s, w)
		}
		if !missing {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("the terminal never showed %q; it got %q", want, p.screen.String())
}

func (p *ptyRun) result() error {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		p.t.Fatal("Run does not return")
		return nil
	}
}

// TestStartBeforeServer starts the viewer before the server, as a split
// terminal or compose up does: it says the API cannot be reached, retries,
// and shows the captures once the server answers.
func TestStartBeforeServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.stop()
	cfg := e.config()
	cfg.Output = nil
	p := runOnPTY(t, cfg)
	p.waitText("✖ offline", "cannot reach the API: connection refused", "retry in")
	e.start()
	p.waitText("Confirm your account", "● live")
	p.master.WriteString("q")
	if err := p.result(); err != nil {
		t.Fatalf("Run = %v after q", err)
	}
}

// TestStartBeforeServerBadKey checks that a key the server refuses once it
// answers still ends the viewer with the error it would have had at the
// start.
func TestStartBeforeServerBadKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.stop()
	cfg := e.config()
	cfg.Output = nil
	cfg.Client = apiclient.New(e.client.BaseURL(), "cap_wrong", nil)
	p := runOnPTY(t, cfg)
	p.waitText("cannot reach the API")
	e.start()
	err := p.result()
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "refused the key") {
		t.Fatalf("Run = %v, want a StartError saying the key was refused", err)
	}
}
