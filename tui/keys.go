package tui

import "github.com/charmbracelet/bubbles/key"

type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Next, Prev, Enter, Back                 key.Binding
	Filter, Replay, Delete, Open, Save      key.Binding
	Code                                    key.Binding
	Headers, Raw, Help, Quit                key.Binding
}

func newKeyMap() keyMap {
	b := func(help string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(keys[0], help))
	}
	return keyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+d", " "), key.WithHelp("pgdn", "page down")),
		Top:      b("top", "g", "home"),
		Bottom:   b("bottom, older pages", "G", "end"),
		Next:     b("next pane", "tab"),
		Prev:     b("previous pane", "shift+tab"),
		Enter:    b("open", "enter"),
		Back:     b("back / close", "esc"),
		Filter:   b("filter the list", "/"),
		Replay:   b("replay a request", "r"),
		Delete:   b("delete (asks first)", "d"),
		Open:     b("open or copy a link", "o"),
		Save:     b("save an attachment", "a"),
		Code:     b("copy the verification code", "c"),
		Headers:  b("all headers on/off", "h"),
		Raw:      b("raw on/off", "v"),
		Help:     b("this help", "?"),
		Quit:     b("quit", "q", "ctrl+c"),
	}
}

// helpSection is a group of keys in the help overlay; a section without a
// name follows the one before it.
type helpSection struct {
	name     string
	bindings []key.Binding
}

// helpSections is the help overlay's content, grouped as a reader scans it.
func (k keyMap) helpSections() []helpSection {
	return []helpSection{
		{"Move", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Next, k.Prev, k.Enter, k.Back}},
		{"Captures", []key.Binding{k.Filter, k.Replay, k.Delete, k.Open, k.Save, k.Code, k.Headers, k.Raw}},
		{"", []key.Binding{k.Help, k.Quit}},
	}
}
