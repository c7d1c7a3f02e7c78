package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

func newUserCmd() *cobra.Command {
	c := &cobra.Command{Use: "user", Short: "Sign-in to the web interface: set the password, print a one-time link"}

	setPassword := &cobra.Command{
		Use:   "set-password",
		Short: "Set the web interface's password (read without echo, or from stdin)",
		Long: `set-password sets the password that signs in to the web interface (at least
8 characters). From a terminal it asks twice without echo; otherwise it reads
the first line of stdin. Browsers signed in with the old password sign in again.`,
		Example: "  capture user set-password\n  printf '%s\\n' \"$PASSWORD\" | capture user set-password",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			password, err := readNewPassword(c)
			if err != nil {
				return err
			}
			// Checked before the database is opened.
			if err := store.ValidNewPassword(password); err != nil {
				return err
			}
			return withStore(c, func(st *store.Store) error {
				if err := st.SetPassword(c.Context(), password); err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "web password set; browsers signed in before sign in again\n")
				return nil
			})
		},
	}

	loginLink := &cobra.Command{
		Use:   "login-link",
		Short: "Print a one-time sign-in link for the web interface (valid 15 min)",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(c, func(st *store.Store) error {
				addrs, ok, err := st.Addresses(c.Context())
				if err != nil {
					return err
				}
				if !ok || addrs.HTTPBase == "" {
					return fmt.Errorf("no address of the web interface recorded: run `capture serve` first")
				}
				token, err := st.CreateLoginToken(c.Context())
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "%s\n", web.LoginURL(addrs.HTTPBase, token))
				return nil
			})
		},
	}
	c.AddCommand(setPassword, loginLink)
	return c
}

// readNewPassword asks for the password twice without echo on a terminal,
// and otherwise reads the first line of stdin. Either read ends at once
// with errInterrupted when the command's context ends (SIGINT, SIGTERM).
func readNewPassword(c *cobra.Command) (string, error) {
	in := c.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return askPassword(c.Context(), f, c.ErrOrStderr())
	}
	return interruptible(c.Context(), func() (string, error) {
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password from stdin: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	})
}

// interruptible runs read, which may block on a terminal or pipe for good,
// and returns its result, or errInterrupted as soon as ctx ends. A read
// left blocked is abandoned: the process exits right after.
func interruptible(ctx context.Context, read func() (string, error)) (string, error) {
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := read()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		return "", errInterrupted
	}
}

var (
	// errNoPassword is Ctrl-D (end of input) at a password prompt.
	errNoPassword      = errors.New("no password given (end of input); nothing changed")
	errPasswordsDiffer = errors.New("the two passwords differ; nothing changed")
)

// askPassword asks for the new password twice on the terminal f. The
// terminal is in raw mode meanwhile, so that Ctrl-C and Ctrl-D reach the
// reader as keys (term.ReadPassword ignores both and leaves echo off when
// the process is interrupted); it is restored on every way out.
func askPassword(ctx context.Context, f *os.File, prompts io.Writer) (password string, err error) {
	fd := int(f.Fd())
	saved, err := term.MakeRaw(fd)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	defer func() {
		term.Restore(fd, saved)
		if err != nil && !errors.Is(err, errPasswordsDiffer) {
			// The error goes below the prompt, not after it.
			fmt.Fprintln(prompts)
		}
	}()
	r := &hiddenLineReader{r: f, echo: prompts}
	return interruptible(ctx, func() (string, error) {
		first, err := r.readLine("New web password: ")
		if err != nil {
			return "", err
		}
		second, err := r.readLine("Repeat it: ")
		if err != nil {
			return "", err
		}
		if first != second {
			return "", errPasswordsDiffer
		}
		return first, nil
	})
}

// Keys a raw terminal sends as bytes.
const (
	keyCtrlC     = 0x03
	keyCtrlD     = 0x04
	keyBackspace = 0x08
	keyCtrlU     = 0x15
	keyDelete    = 0x7f
)

// hiddenLineReader reads lines typed on a raw terminal without showing
// them, with the editing keys a password prompt needs: backspace, and
// Ctrl-U to start over.
type hiddenLineReader struct {
	r    io.Reader
	echo io.Writer
	// afterCR drops the LF of a CR LF pair (a paste), which would
	// otherwise answer the next prompt with an empty line.
	afterCR bool
}

func (h *hiddenLineReader) readLine(prompt string) (string, error) {
	fmt.Fprint(h.echo, prompt)
	var line []byte
	var b [1]byte
	for {
		// One byte at a time: what follows Enter belongs to the next prompt.
		if _, err := io.ReadFull(h.r, b[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return "", errNoPassword
			}
			return "", fmt.Errorf("read password: %w", err)
		}
		afterCR := h.afterCR
		h.afterCR = false
		switch b[0] {
		case keyCtrlC:
			return "", errInterrupted
		case keyCtrlD:
			return "", errNoPassword
		case '\r', '\n':
			if b[0] == '\n' && afterCR && len(line) == 0 {
				continue
			}
			h.afterCR = b[0] == '\r'
			// Raw mode moves to no new line on Enter by itself.
			fmt.Fprint(h.echo, "\r\n")
			return string(line), nil
		case keyBackspace, keyDelete:
			_, size := utf8.DecodeLastRune(line)
			line = line[:len(line)-size]
		case keyCtrlU:
			line = line[:0]
		default:
			line = append(line, b[0])
		}
	}
}
