package tui

import (
	"strconv"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

func (m *Model) handleKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	if msg.Type == tea.KeyCtrlC {
		m.stop()
		return tea.Quit
	}
	// Keys typed faster than they are read come as one message of several
	// runes; outside a text field each one is a command of its own.
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && m.mode != modeFilter {
		var cmds []tea.Cmd
		for _, r := range msg.Runes {
			cmds = append(cmds, m.handleKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
		}
		return tea.Batch(cmds...)
	}
	switch m.mode {
	case modeFilter:
		return m.filterKey(msg)
	case modeConfirm:
		m.mode = modeNormal
		if msg.String() == "y" || msg.String() == "Y" {
			c := m.confirm
			m.setNotice("deleting "+c.id()+"…", false)
			return deleteCapture(m.ctx, m.client, c.id(), c.kind())
		}
		m.setNotice("kept it", false)
		return nil
	case modeHelp:
		m.helpKey(msg)
		return nil
	case modeLinks, modeAttachments:
		return m.pickerKey(msg)
	}

	m.notice = ""
	switch {
	case key.Matches(msg, k.Quit):
		m.stop()
		return tea.Quit
	case key.Matches(msg, k.Help):
		m.mode, m.helpTop = modeHelp, 0
		return nil
	case key.Matches(msg, k.Next):
		return m.cycleFocus(1)
	case key.Matches(msg, k.Prev):
		return m.cycleFocus(-1)
	case key.Matches(msg, k.Filter):
		src := m.current()
		if src == nil {
			return nil
		}
		m.mode = modeFilter
		m.input.Placeholder = filterHint(src.kind)
		m.input.SetValue(m.filters[src.id])
		m.input.CursorEnd()
		m.input.Width = max(10, m.width-34)
		return m.input.Focus()
	}
	switch m.focus {
	case paneSources:
		return m.sourcesKey(msg)
	case paneList:
		return m.listKey(msg)
	default:
		return m.detailKey(msg)
	}
}

// helpKey closes the help, or scrolls it where it does not fit.
func (m *Model) helpKey(msg tea.KeyMsg) {
	k := m.keys
	lines, rows := m.helpLayout(m.bodyHeight())
	last := len(lines) - rows
	switch {
	case key.Matches(msg, k.Help, k.Back) || msg.String() == "q":
		m.mode = modeNormal
	case key.Matches(msg, k.Up):
		m.helpTop--
	case key.Matches(msg, k.Down):
		m.helpTop++
	case key.Matches(msg, k.PageUp):
		m.helpTop -= rows
	case key.Matches(msg, k.PageDown):
		m.helpTop += rows
	case key.Matches(msg, k.Top):
		m.helpTop = 0
	case key.Matches(msg, k.Bottom):
		m.helpTop = last
	}
	m.helpTop = max(0, min(m.helpTop, last))
}

func (m *Model) filterKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		return nil
	case tea.KeyEnter:
		src := m.current()
		if src == nil {
			m.mode = modeNormal
			return nil
		}
		text := m.input.Value()
		if _, err := parseFilter(src.kind, text); err != nil {
			m.setNotice(err.Error(), true)
			return nil
		}
		m.mode = modeNormal
		m.input.Blur()
		m.notice = ""
		if text == m.filters[src.id] {
			return nil
		}
		if text == "" {
			delete(m.filters, src.id)
		} else {
			m.filters[src.id] = text
		}
		m.closeDetail()
		return m.reloadList()
	}
	// Text typed faster than it is read, or pasted where the terminal
	// does not mark pastes, comes as one message of several runes: it is
	// text, even when it spells a key's name ("delete", "up", "home").
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Alt {
		msg.Paste = true
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

// cycleFocus moves between the panes. Where the detail does not fit beside
// the list, focusing it opens the selection full screen.
func (m *Model) cycleFocus(dir int) tea.Cmd {
	order := []pane{paneSources, paneList, paneDetail}
	i := int(m.focus)
	for range order {
		i = (i + dir + len(order)) % len(order)
		if order[i] != paneDetail {
			break
		}
		if c, ok := m.selected(); ok {
			m.focus = paneDetail
			return m.openDetail(c)
		}
	}
	m.focus = order[i]
	return nil
}

func (m *Model) sourcesKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	n := len(m.sources)
	if n == 0 {
		return nil
	}
	to := m.srcIdx
	switch {
	case key.Matches(msg, k.Up):
		to--
	case key.Matches(msg, k.Down):
		to++
	case key.Matches(msg, k.Top):
		to = 0
	case key.Matches(msg, k.Bottom):
		to = n - 1
	case key.Matches(msg, k.Enter), msg.Type == tea.KeyRight, msg.String() == "l":
		m.focus = paneList
		return nil
	default:
		return nil
	}
	to = max(0, min(n-1, to))
	if to == m.srcIdx {
		return nil
	}
	return m.selectSource(to)
}

func (m *Model) listKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	rows := m.listRows()
	switch {
	case key.Matches(msg, k.Up):
		return m.moveCursor(-1)
	case key.Matches(msg, k.Down):
		return m.moveCursor(1)
	case key.Matches(msg, k.PageUp):
		return m.moveCursor(-rows)
	case key.Matches(msg, k.PageDown):
		return m.moveCursor(rows)
	case key.Matches(msg, k.Top):
		return m.moveCursor(-len(m.list.items))
	case key.Matches(msg, k.Bottom):
		return m.moveCursor(len(m.list.items))
	case key.Matches(msg, k.Enter), msg.Type == tea.KeyRight, msg.String() == "l":
		if c, ok := m.selected(); ok {
			m.focus = paneDetail
			return m.openDetail(c)
		}
	case key.Matches(msg, k.Back), msg.Type == tea.KeyLeft:
		m.focus = paneSources
	default:
		return m.actionKey(msg)
	}
	return nil
}

func (m *Model) detailKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	vp := &m.detail.vp
	switch {
	case key.Matches(msg, k.Up):
		vp.ScrollUp(1)
	case key.Matches(msg, k.Down):
		vp.ScrollDown(1)
	case key.Matches(msg, k.PageUp):
		vp.PageUp()
	case key.Matches(msg, k.PageDown):
		vp.PageDown()
	case key.Matches(msg, k.Top):
		vp.GotoTop()
	case key.Matches(msg, k.Bottom):
		vp.GotoBottom()
	case key.Matches(msg, k.Back), msg.Type == tea.KeyLeft:
		m.focus = paneList
	case key.Matches(msg, k.Headers):
		if m.detail.kind == kindInbox {
			m.showHeaders = !m.showHeaders
			m.refreshDetail()
		}
	case key.Matches(msg, k.Raw):
		m.detail.showRaw = !m.detail.showRaw
		var cmd tea.Cmd
		if m.detail.showRaw && m.detail.kind == kindInbox && m.detail.raw == nil && !m.detail.rawLoading {
			m.detail.rawLoading = true
			cmd = loadRaw(m.ctx, m.client, m.detail.id)
		}
		m.refreshDetail()
		return cmd
	default:
		return m.actionKey(msg)
	}
	return nil
}

// actionKey handles what acts on a capture, from the list or its detail.
func (m *Model) actionKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	c, ok := m.target()
	if !ok {
		return nil
	}
	switch {
	case key.Matches(msg, k.Replay):
		if c.req == nil {
			m.setNotice("only webhook requests can be replayed", true)
			return nil
		}
		m.setNotice("replaying "+c.req.Method+" "+c.req.Target()+"…", false)
		return replay(m.ctx, m.client, c.id())
	case key.Matches(msg, k.Delete):
		m.confirm = c
		m.mode = modeConfirm
	case key.Matches(msg, k.Open), key.Matches(msg, k.Save):
		if c.msg == nil {
			m.setNotice("links and attachments belong to messages", true)
			return nil
		}
		want := modeLinks
		if key.Matches(msg, k.Save) {
			want = modeAttachments
		}
		if m.detail.id == c.id() && m.detail.msg != nil {
			m.openPicker(want)
			return nil
		}
		m.pendingPick = want
		return m.openDetail(c)
	case key.Matches(msg, k.Code):
		if c.msg == nil {
			m.setNotice("verification codes belong to messages", true)
			return nil
		}
		if m.detail.id == c.id() && m.detail.msg != nil {
			return m.copyCode()
		}
		m.pendingCode = c.id()
		return m.openDetail(c)
	}
	return nil
}

// copyCode puts the open message's first code, the most likely one, on
// the clipboard.
func (m *Model) copyCode() tea.Cmd {
	if m.detail.msg == nil {
		return nil
	}
	if len(m.detail.msg.Codes) == 0 {
		m.setNotice("this message has no verification code", false)
		return nil
	}
	code := m.detail.msg.Codes[0].Value
	return copyToClipboard(m.cfg.Output, code, "the code "+clean(code))
}

func (m *Model) openPicker(p mode) {
	if m.detail.msg == nil {
		return
	}
	switch {
	case p == modeLinks && len(m.detail.msg.Links) == 0:
		m.setNotice("this message has no links", false)
	case p == modeAttachments && len(m.detail.msg.Attachments) == 0:
		m.setNotice("this message has no attachments", false)
	default:
		m.mode, m.pick = p, 0
	}
}

func (m *Model) pickerKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	if m.detail.msg == nil {
		m.mode = modeNormal
		return nil
	}
	n := len(m.detail.msg.Links)
	if m.mode == modeAttachments {
		n = len(m.detail.msg.Attachments)
	}
	if n == 0 {
		m.mode = modeNormal
		return nil
	}
	m.pick = max(0, min(n-1, m.pick))
	choose := false
	switch {
	case key.Matches(msg, k.Back), key.Matches(msg, k.Quit), msg.Type == tea.KeyLeft:
		m.mode = modeNormal
		return nil
	case key.Matches(msg, k.Up):
		m.pick = max(0, m.pick-1)
	case key.Matches(msg, k.Down):
		m.pick = min(n-1, m.pick+1)
	case key.Matches(msg, k.Top):
		m.pick = 0
	case key.Matches(msg, k.Bottom):
		m.pick = n - 1
	case key.Matches(msg, k.Enter):
		choose = true
	case m.mode == modeLinks && (msg.String() == "c" || msg.String() == "y"):
		m.mode = modeNormal
		link := m.detail.msg.Links[m.pick]
		return copyToClipboard(m.cfg.Output, link.URL, "link "+strconv.Itoa(m.pick+1))
	default:
		// A digit picks that entry at once.
		if d, err := strconv.Atoi(msg.String()); err == nil && d >= 1 && d <= n {
			m.pick, choose = d-1, true
		}
	}
	if !choose {
		return nil
	}
	mode := m.mode
	m.mode = modeNormal
	if mode == modeLinks {
		link := m.detail.msg.Links[m.pick]
		m.setNotice("opening "+link.URL, false)
		return openLink(m.cfg.OpenURL, m.cfg.Output, link.URL)
	}
	a := m.detail.msg.Attachments[m.pick]
	m.setNotice("saving "+attachmentLabel(a)+"…", false)
	return saveAttachment(m.ctx, m.client, m.cfg.SaveDir, m.detail.id, a)
}

// moveCursor moves the list selection by delta; moving past the end loads
// the next older page.
func (m *Model) moveCursor(delta int) tea.Cmd {
	n := len(m.list.items)
	if n == 0 {
		return nil
	}
	var cmds []tea.Cmd
	to := m.list.cursor + delta
	if to >= n-5 {
		cmds = append(cmds, m.loadOlder())
	}
	m.list.cursor = max(0, min(n-1, to))
	m.list.items[m.list.cursor].fresh = false
	m.clampList()
	return tea.Batch(append(cmds, m.follow())...)
}

// clampList keeps the cursor on a capture and in view.
func (m *Model) clampList() {
	n := len(m.list.items)
	m.list.cursor = max(0, min(n-1, m.list.cursor))
	rows := max(1, m.listRows())
	if m.list.cursor < m.list.offset {
		m.list.offset = m.list.cursor
	}
	if m.list.cursor >= m.list.offset+rows {
		m.list.offset = m.list.cursor - rows + 1
	}
	m.list.offset = max(0, min(m.list.offset, n-1))
}
