// Package quietterm keeps the commands that draw nothing from asking the
// terminal anything. Bubble Tea's package init asks the terminal for its
// background colour whenever standard output is one, and waits up to 5 s
// for an answer that a pseudo-terminal with nobody behind it never gives
// (`docker run -t` in a CI job, `script`, expect): every command, even
// `capture version`, then took 5 s. Only `capture tui` draws with Lip
// Gloss, and it asks its own renderer. This package is initialized before
// Bubble Tea's (Go initializes ready packages in import path order, and
// github.com/capturedev sorts before github.com/charmbracelet), and for
// any other command settles the answer without asking.
package quietterm

import (
	"os"
	"slices"

	"github.com/charmbracelet/lipgloss"
)

func init() {
	// A flag's value that happens to read "tui" only costs the question.
	if !slices.Contains(os.Args[1:], "tui") {
		lipgloss.SetHasDarkBackground(true)
	}
}
