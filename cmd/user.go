package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			password, err := readNewPassword(c)
			if err != nil {
				return err
			}
			if n := len([]rune(password)); n < store.MinPasswordLength {
				return fmt.Errorf("the password must be at least %d characters (got %d)", store.MinPasswordLength, n)
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
		Args:  cobra.NoArgs,
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
// and otherwise reads the first line of stdin.
func readNewPassword(c *cobra.Command) (string, error) {
	in := c.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		fmt.Fprint(c.ErrOrStderr(), "New web password: ")
		first, err := term.ReadPassword(fd)
		fmt.Fprintln(c.ErrOrStderr())
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(c.ErrOrStderr(), "Repeat it: ")
		second, err := term.ReadPassword(fd)
		fmt.Fprintln(c.ErrOrStderr())
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(second) {
			return "", errors.New("the two passwords differ; nothing changed")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}
