package tui

import "github.com/charmbracelet/lipgloss"

// styles are built from the model's renderer, so that a terminal without
// colour (or NO_COLOR) gets plain text; everything that matters is also
// marked with a character, never by colour alone.
type styles struct {
	border, borderFocused lipgloss.Style
	title, titleFocused   lipgloss.Style
	dim, label, accent    lipgloss.Style
	selected, selectedDim lipgloss.Style
	fresh                 lipgloss.Style
	ok, warn, bad         lipgloss.Style
	method                lipgloss.Style
	bar, barKey           lipgloss.Style
	live, offline         lipgloss.Style
	overlay               lipgloss.Style
	jsonKey, jsonString   lipgloss.Style
	jsonNumber, jsonLit   lipgloss.Style
	jsonPunct             lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	c := func(light, dark string) lipgloss.AdaptiveColor {
		return lipgloss.AdaptiveColor{Light: light, Dark: dark}
	}
	var (
		accent = c("#5A3FC0", "#A68BFF")
		dim    = c("#8A8A8A", "#6C6C6C")
		green  = c("#1E7B34", "#5FD787")
		yellow = c("#9A6700", "#E5C07B")
		red    = c("#B3261E", "#FF6B6B")
		cyan   = c("#0B6E8A", "#56B6C2")
		selBG  = c("#E4DEFF", "#3B3563")
		barBG  = c("#ECECEC", "#262626")
	)
	s := r.NewStyle
	return styles{
		border:        s().Foreground(dim),
		borderFocused: s().Foreground(accent),
		title:         s().Foreground(dim),
		titleFocused:  s().Foreground(accent).Bold(true),
		dim:           s().Foreground(dim),
		label:         s().Foreground(dim),
		accent:        s().Foreground(accent),
		selected:      s().Background(selBG).Bold(true),
		selectedDim:   s().Background(barBG),
		fresh:         s().Foreground(yellow),
		ok:            s().Foreground(green),
		warn:          s().Foreground(yellow),
		bad:           s().Foreground(red),
		method:        s().Foreground(cyan).Bold(true),
		bar:           s().Background(barBG),
		barKey:        s().Background(barBG).Foreground(accent).Bold(true),
		live:          s().Background(barBG).Foreground(green).Bold(true),
		offline:       s().Background(barBG).Foreground(red).Bold(true),
		overlay:       s().Border(lipgloss.RoundedBorder()).BorderForeground(accent).Padding(0, 1),
		jsonKey:       s().Foreground(cyan),
		jsonString:    s().Foreground(green),
		jsonNumber:    s().Foreground(yellow),
		jsonLit:       s().Foreground(accent),
		jsonPunct:     s().Foreground(dim),
	}
}
