// Package cmd holds capture's cobra commands. Each builds a configuration
// from its flags and calls into a package; none holds logic of its own.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// usageError marks a mistake in how the command was called: bad flags or
// arguments. It exits with 2, like flag parsing errors everywhere.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError carries a specific exit code with a message already printed or
// to print.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// errInterrupted ends a command that Ctrl-C (or SIGINT, SIGTERM) stopped
// before it changed anything.
var errInterrupted = errors.New("interrupted; nothing changed")

// exitInterrupted is the exit code of a command stopped by Ctrl-C: what a
// shell reports for a process that SIGINT ended (128 + 2).
const exitInterrupted = 130

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context) int {
	return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := unknownCommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return 0
	}
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ue):
		// One line: what was wrong, and where the usage is.
		path := "capture"
		if cmd != nil {
			path = cmd.CommandPath()
			if cmd.Name() == "help" && cmd.HasParent() {
				// `capture help frob`: the usage to see is the root's.
				path = cmd.Parent().CommandPath()
			}
		}
		fmt.Fprintf(stderr, "capture: %s (see '%s --help')\n", oneLine(err.Error()), path)
		return 2
	case errors.As(err, &ee):
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "capture: %s\n", oneLine(ee.err.Error()))
		}
		return ee.code
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "capture: %v\n", err)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "capture: %s\n", oneLine(err.Error()))
		return 1
	}
}

// oneLine folds a message that spans lines into one, as errors are printed
// (README): libraries such as pgx list each failed connection attempt on a
// line of its own, often the same line twice (TLS, then plain). Lines said
// already are dropped; a line that ends in ":" runs on into the next.
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || seen[line] || strings.HasSuffix(b.String(), ": "+line) {
			continue
		}
		seen[line] = true
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// unknownCommand looks, before cobra parses a flag, for a word that should
// name a subcommand and names none. Cobra would report a flag the mistyped
// command does not know (`capture wiat email --to x` as "unknown flag:
// --to"), or print help and exit 0 (`capture bogus --help`); SPEC §1 wants
// the unknown command named, exit 2.
func unknownCommand(root *cobra.Command, args []string) (*cobra.Command, error) {
	// Cobra adds these two at execution; they must be found as commands.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	c, rest, err := root.Find(args)
	if err != nil || !c.HasSubCommands() {
		return nil, nil
	}
	word := firstWord(c, rest)
	if word == "" || strings.HasPrefix(word, cobra.ShellCompRequestCmd) {
		return nil, nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return c, usageError{errors.New(msg)}
}

// firstWord is the first of args that is neither a flag nor a flag's
// value, as c's flags read them; "" when there is none.
func firstWord(c *cobra.Command, args []string) string {
	lookup := func(name string, short bool) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags()} {
			if short {
				if f := fs.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			// A flag that takes a value takes the next word with it.
			if f := lookup(a[2:], false); f != nil && f.NoOptDefVal == "" {
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) == 2:
			if f := lookup(a[1:], true); f != nil && f.NoOptDefVal == "" {
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// --name=value, or -xVALUE.
		default:
			return a
		}
	}
	return ""
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "capture",
		Short: "Catch the email and webhooks your app sends, and read them back",
		Long: `capture catches the email (SMTP) and webhooks (HTTP) that an application sends
during development and CI. Nothing is ever delivered onward. Tests, people and
coding agents read the captures back through a JSON API with long-poll waits.

Start with:   capture serve
Then point your app's SMTP settings and webhook URLs at the addresses it prints.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		// Without it cobra reports an unknown command itself, as an error
		// that is not a usage error; RunE names it instead.
		Args: cobra.ArbitraryArgs,
		// A bare `capture` shows help rather than doing something surprising.
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], c.CommandPath())
			}
			return c.Help()
		},
	}
	root.PersistentFlags().String("data-dir", "", "data directory (default $CAPTURE_DATA_DIR, else $XDG_DATA_HOME/capture, else ~/.local/share/capture)")
	root.PersistentFlags().String("database", "", "postgres://… database to serve and administer instead of the data dir's SQLite one (default $"+databaseEnv+")")
	root.SetFlagErrorFunc(flagError)
	// `capture help TOPIC` for a topic that is no command is a usage error,
	// as `capture TOPIC` is, rather than the root's help and exit 0.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || (target == root && len(args) > 0) {
				return usagef("unknown help topic %q for %q", strings.Join(args, " "), root.CommandPath())
			}
			return target.Help()
		},
	})
	// `capture --version` prints what `capture version` does.
	root.SetVersionTemplate("capture {{.Version}}\n")
	root.AddCommand(
		newServeCmd(),
		newProjectCmd(),
		newKeyCmd(),
		newInboxCmd(),
		newEndpointCmd(),
		newUserCmd(),
		newCACmd(),
		newForwardCmd(),
		newWaitCmd(),
		newTUICmd(),
		newMCPCmd(),
		newBenchCmd(),
		newVersionCmd(),
	)
	for _, c := range root.Commands() {
		addArgsCheck(c)
	}
	return root
}

// addArgsCheck turns cobra's argument-count errors into usage errors, down
// the whole tree.
func addArgsCheck(c *cobra.Command) {
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
	for _, sub := range c.Commands() {
		addArgsCheck(sub)
	}
}

// noArgs is cobra.NoArgs in the words of the other usage errors: cobra's
// own, `unknown command "x" for "capture serve"`, reads as if a
// subcommand had been mistyped.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("no arguments expected, got %q", args[0])
	}
	return nil
}

// exactArgs is cobra.ExactArgs naming what is missing or extra, in the
// words of names (one per argument), with the usage line: cobra's own
// "accepts 1 arg(s), received 0" says neither.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usagef("missing %s: %s", names[len(args)], c.UseLine())
		case len(args) > len(names):
			return usagef("unexpected argument %q: %s", args[len(names)], c.UseLine())
		}
		return nil
	}
}

// wantAnnotation holds what a flag's value should be, when the words for
// its type (flagError) would suggest values it refuses.
const wantAnnotation = "capture_want"

// setWant makes flagError say want for a value of flag name it cannot
// read: "a duration from 0 to 10s, such as 250ms or 2s" for a delay that
// 30s or 1h30m would not fit.
func setWant(f *pflag.FlagSet, name, want string) {
	if err := f.SetAnnotation(name, wantAnnotation, []string{want}); err != nil {
		panic(err) // a flag not defined: a mistake in the code
	}
}

// flagError says what a flag's value should be in place of the parser's
// own text (`invalid argument "1.5" for "--timeout" flag: time: invalid
// duration "1.5"`).
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return usageError{err}
	}
	if want := bad.GetFlag().Annotations[wantAnnotation]; len(want) > 0 {
		return usagef("--%s %s: want %s", bad.GetFlag().Name, bad.GetValue(), want[0])
	}
	want := ""
	switch bad.GetFlag().Value.Type() {
	case "int", "int64", "int32", "uint", "uint64":
		want = "a whole number"
	case "duration":
		want = "a duration such as 30s, 2m or 1h30m"
	case "bool":
		want = "true or false"
	case "float64":
		want = "a number"
	default:
		return usageError{err}
	}
	return usagef("--%s %s: want %s", bad.GetFlag().Name, bad.GetValue(), want)
}
