//go:build linux

package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capturedev/capture/store"
)

// terminal is `capture user set-password` running on a pseudo-terminal, as
// when a person types at it.
type terminal struct {
	t      *testing.T
	master *os.File // what the person types into and sees
	cmd    *exec.Cmd
	screen []byte
}

// startOnTerminal runs `capture user set-password` over dir on a new
// pseudo-terminal whose controlling process it is, as a shell would start it.
func startOnTerminal(t *testing.T, dir string) *terminal {
	return runOnTerminal(t, "user", "set-password", "--data-dir", dir)
}

// runOnTerminal runs capture with args on a new pseudo-terminal whose
// controlling process it is. Nothing answers what the command may ask the
// terminal.
func runOnTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	// SyscallConn, not Fd: Fd would make reads blocking, deaf to deadlines.
	var n int
	ctlErr := control(master, func(fd int) error {
		var err error
		if n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN); err != nil {
			return err
		}
		return unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	})
	if ctlErr != nil {
		t.Fatal(ctlErr)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	err = cmd.Start()
	tty.Close() // the command holds the terminal now; its exit ends the reads
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return &terminal{t: t, master: master, cmd: cmd}
}

func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := rc.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

// waitFor reads the screen until it shows want.
func (term *terminal) waitFor(want string) {
	term.t.Helper()
	term.master.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 1024)
	for !strings.Contains(string(term.screen), want) {
		n, err := term.master.Read(buf)
		term.screen = append(term.screen, buf[:n]...)
		if err != nil {
			term.t.Fatalf("no %q on the terminal (%v); it shows %q", want, err, term.screen)
		}
	}
}

func (term *terminal) typeKeys(keys string) {
	term.t.Helper()
	if _, err := term.master.WriteString(keys); err != nil {
		term.t.Fatal(err)
	}
}

// exit reads the screen until the command ends, and returns its exit code
// with all it showed.
func (term *terminal) exit() (int, string) {
	term.t.Helper()
	term.master.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 1024)
	for {
		n, err := term.master.Read(buf)
		term.screen = append(term.screen, buf[:n]...)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			term.t.Fatalf("still running; the terminal shows %q", term.screen)
		}
		if err != nil {
			break // EIO: the command has closed the terminal
		}
	}
	term.cmd.Wait()
	return term.cmd.ProcessState.ExitCode(), string(term.screen)
}

// echoes says whether the terminal shows what is typed, as a shell needs
// it to after the command.
func (term *terminal) echoes() bool {
	term.t.Helper()
	var lflag uint32
	err := control(term.master, func(fd int) error {
		tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil {
			lflag = tio.Lflag
		}
		return err
	})
	if err != nil {
		term.t.Fatal(err)
	}
	return lflag&unix.ECHO != 0 && lflag&unix.ICANON != 0
}

func TestUserSetPasswordOnTerminal(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	passwordSet := func() bool {
		st, err := store.OpenDir(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		has, err := st.HasPassword(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return has
	}

	// Ctrl-C stops it at once, changes nothing and gives the terminal back.
	term := startOnTerminal(t, dir)
	term.waitFor("New web password: ")
	term.typeKeys("secret123\x03")
	code, screen := term.exit()
	if code != exitInterrupted || !strings.Contains(screen, "capture: interrupted; nothing changed") || strings.Contains(screen, "secret") {
		t.Errorf("Ctrl-C: exit %d, terminal shows %q", code, screen)
	}
	if !term.echoes() {
		t.Error("Ctrl-C left echo off")
	}

	// So does SIGINT from elsewhere (or SIGTERM) while it waits for a key.
	term = startOnTerminal(t, dir)
	term.waitFor("New web password: ")
	term.cmd.Process.Signal(syscall.SIGINT)
	if code, screen := term.exit(); code != exitInterrupted || !strings.Contains(screen, "interrupted") {
		t.Errorf("SIGINT: exit %d, terminal shows %q", code, screen)
	}
	if !term.echoes() {
		t.Error("SIGINT left echo off")
	}

	// Ctrl-D (end of input) at either prompt gives up with one line.
	term = startOnTerminal(t, dir)
	term.waitFor("New web password: ")
	term.typeKeys("a long password\r")
	term.waitFor("Repeat it: ")
	term.typeKeys("\x04")
	code, screen = term.exit()
	if code != 1 || !strings.Contains(screen, "capture: no password given (end of input); nothing changed\r\n") {
		t.Errorf("Ctrl-D: exit %d, terminal shows %q", code, screen)
	}
	if !term.echoes() {
		t.Error("Ctrl-D left echo off")
	}
	if passwordSet() {
		t.Fatal("a password was set by an aborted set-password")
	}

	// Typed twice, with a typo erased, without echo.
	term = startOnTerminal(t, dir)
	term.waitFor("New web password: ")
	term.typeKeys("correct horsx\x7fe battery\r")
	term.waitFor("Repeat it: ")
	term.typeKeys("correct horse battery\r")
	code, screen = term.exit()
	if code != 0 || !strings.Contains(screen, "web password set") || strings.Contains(screen, "horse") {
		t.Errorf("typed: exit %d, terminal shows %q", code, screen)
	}
	if !term.echoes() {
		t.Error("set-password left echo off")
	}
	st, err := store.OpenDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CheckPassword(t.Context(), "correct horse battery"); err != nil {
		t.Errorf("the typed password does not check: %v", err)
	}
}

// TestCommandsAskTheTerminalNothing: Bubble Tea's package init asks a
// terminal for its background colour and waits 5 s for an answer that a
// pseudo-terminal with nobody behind it (`docker run -t` in CI, `script`)
// never gives. Only `capture tui` may ask.
func TestCommandsAskTheTerminalNothing(t *testing.T) {
	t.Parallel()
	term := runOnTerminal(t, "version")
	code, screen := term.exit()
	if code != 0 || !strings.Contains(screen, "capture ") {
		t.Fatalf("capture version exited %d showing %q", code, screen)
	}
	if strings.Contains(screen, "\x1b]11;?") || strings.Contains(screen, "\x1b[6n") {
		t.Errorf("capture version asked the terminal: %q", screen)
	}
}
