package tui

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

type sourceKind int

const (
	kindInbox sourceKind = iota
	kindEndpoint
)

// source is an inbox or an endpoint in the sources pane.
type source struct {
	kind     sourceKind
	id, name string
	count    int64
	// seen is the count when the source was last looked at; the pane
	// shows what arrived since.
	seen int64
}

// capture is one row of the list: a message or a request.
type capture struct {
	msg *contract.MessageSummary
	req *contract.RequestSummary
	// fresh marks a capture that arrived while watching and has not been
	// looked at yet.
	fresh bool
}

func (c capture) id() string {
	if c.req != nil {
		return c.req.ID
	}
	return c.msg.ID
}

func (c capture) kind() sourceKind {
	if c.req != nil {
		return kindEndpoint
	}
	return kindInbox
}

func (c capture) receivedAt() time.Time {
	if c.req != nil {
		return c.req.ReceivedAt.Time
	}
	return c.msg.ReceivedAt.Time
}

type pane int

const (
	paneSources pane = iota
	paneList
	paneDetail
)

type mode int

const (
	modeNormal mode = iota
	modeFilter
	modeConfirm
	modeHelp
	modeLinks
	modeAttachments
)

// listState is the capture list of the selected source. gen changes with
// every new source or filter so that answers to older questions are
// dropped.
type listState struct {
	gen          int
	f            filter
	items        []capture
	cursor       int
	offset       int
	older        string // `before` cursor of the next older page; "" when none
	loaded       bool
	loadingOlder bool
}

// detail is the capture opened in the detail pane.
type detail struct {
	id         string
	kind       sourceKind
	msg        *contract.Message
	req        *contract.Request
	err        error
	raw        []byte
	rawLoading bool
	showRaw    bool
	vp         viewport.Model
}

func (d *detail) loaded() bool { return d.msg != nil || d.req != nil }

// Model is the viewer's bubbletea model. Its methods are meant to be
// called by a tea.Program only.
type Model struct {
	cfg    Config
	client *apiclient.Client
	ctx    context.Context
	cancel context.CancelFunc
	keys   keyMap
	st     styles
	loc    *time.Location

	width, height int

	me     contract.Me
	haveMe bool
	// unchecked is set while the key has not been checked, the API not
	// having answered when the viewer started; a refusal then ends the
	// viewer with startErr, as it would have at the start.
	unchecked bool
	startErr  *StartError
	sources   []source
	srcIdx    int // -1 until there is a source
	loaded    bool
	filters   map[string]string // typed filter text by source id

	list  listState
	focus pane

	// One long-poll at a time: a new one starts only after the previous
	// call has returned, so the viewer never holds two of the project's
	// wait slots.
	polling     bool
	pollCancel  context.CancelFunc
	pollRestart bool
	pollSeq     int
	pollGen     int // list generation the poll in flight is for

	detail         detail
	showHeaders    bool
	deliveriesBusy bool
	// rechecked is the list's captures when the newest of them were last
	// read again, which refreshDeliveries does.
	rechecked map[string]bool
	replays   map[string]contract.Replay

	mode        mode
	helpTop     int // first row of the help shown, where it scrolls
	input       textinput.Model
	confirm     capture
	pick        int
	pendingPick mode
	// pendingCode is the message whose code is copied once it is loaded.
	pendingCode string

	notice    string
	noticeBad bool

	errs     map[op]error
	errSeq   map[op]int
	seq      int
	attempts map[op]int
	retryIn  map[op]time.Duration

	retryBase, retryMax time.Duration
	// refreshEvery, when set, replaces the package's refresh interval.
	refreshEvery time.Duration
}

// NewModel returns the viewer for cfg. Its API calls end when ctx does or
// when the user quits.
func NewModel(ctx context.Context, cfg Config) *Model {
	ctx, cancel := context.WithCancel(ctx)
	r := cfg.Renderer
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	if cfg.Output == nil {
		cfg.Output = os.Stdout
	}
	if cfg.OpenURL == nil {
		cfg.OpenURL = openBrowser
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.Local
	}
	st := newStyles(r)
	in := textinput.New()
	in.Prompt = "/"
	in.PromptStyle = st.accent
	in.PlaceholderStyle = st.dim
	in.CharLimit = 200
	return &Model{
		cfg:       cfg,
		client:    cfg.Client,
		ctx:       ctx,
		cancel:    cancel,
		keys:      newKeyMap(),
		st:        st,
		loc:       loc,
		srcIdx:    -1,
		focus:     paneList,
		filters:   map[string]string{},
		replays:   map[string]contract.Replay{},
		input:     in,
		errs:      map[op]error{},
		errSeq:    map[op]int{},
		attempts:  map[op]int{},
		retryIn:   map[op]time.Duration{},
		detail:    detail{vp: viewport.New(0, 0)},
		retryBase: 250 * time.Millisecond,
		retryMax:  5 * time.Second,
	}
}

// stop ends every call in flight, the long-poll first of all, so that its
// wait slot is given back at once.
func (m *Model) stop() { m.cancel() }

// Init loads the project and the sources, and starts the refresh clock.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(loadMe(m.ctx, m.client), loadSources(m.ctx, m.client), tick(m.refreshInterval()))
}

// Update handles one message. A key the API refuses ends the viewer, at
// any time, as it would have at the start: there is nothing to retry.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	if m.startErr != nil {
		m.stop()
		return m, tea.Quit
	}
	return m, cmd
}

// refused records, if err is the API refusing the key, the error the
// viewer ends with, and reports whether it was.
func (m *Model) refused(err error) bool {
	var ae *contract.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || m.ctx.Err() != nil {
		return false
	}
	if m.startErr == nil {
		m.startErr = &StartError{Err: startProblem(m.client.BaseURL(), m.cfg.RefusedKey, err)}
	}
	return true
}

// update applies msg and returns what to run next; Update ends the viewer
// when the key was refused.
func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		if m.detail.id == "" {
			return tea.Batch(m.follow(), m.fill())
		}
		return m.fill()
	case tea.KeyMsg:
		return m.handleKey(msg)
	case meMsg:
		if msg.err != nil && m.unchecked && m.ctx.Err() == nil && !answersLater(msg.err) {
			m.startErr = &StartError{Err: startProblem(m.client.BaseURL(), m.cfg.RefusedKey, msg.err)}
			return nil // Update ends the viewer
		}
		if msg.err != nil {
			return m.fail(opMe, 0, msg.err)
		}
		m.unchecked = false
		m.succeed(opMe)
		m.me, m.haveMe = msg.me, true
		return nil
	case sourcesMsg:
		return m.applySources(msg)
	case pageMsg:
		return m.applyPage(msg)
	case pollMsg:
		return m.applyPoll(msg)
	case detailMsg:
		return m.applyDetail(msg)
	case rawMsg:
		if msg.id != m.detail.id {
			return nil
		}
		m.detail.rawLoading = false
		if m.refused(msg.err) {
			return nil
		}
		if msg.err != nil {
			m.setNotice("raw message: "+describe(msg.err), true)
			m.detail.showRaw = false
		} else {
			m.detail.raw = msg.raw
		}
		m.refreshDetail()
		return nil
	case deliveriesMsg:
		return m.applyDeliveries(msg)
	case replayMsg:
		return m.applyReplay(msg)
	case deleteMsg:
		return m.applyDelete(msg)
	case savedMsg:
		if m.refused(msg.err) {
			return nil
		}
		if msg.err != nil {
			m.setNotice("save failed: "+describe(msg.err), true)
		} else {
			m.setNotice("saved "+msg.path, false)
		}
		return nil
	case noticeMsg:
		if msg.err != nil {
			m.setNotice(msg.err.Error(), true)
		} else {
			m.setNotice(msg.text, false)
		}
		return nil
	case retryMsg:
		return m.retry(msg)
	case detailDueMsg:
		if msg.id == m.detail.id && !m.detail.loaded() {
			return loadDetail(m.ctx, m.client, m.detail.id, m.detail.kind)
		}
		return nil
	case pollSettledMsg:
		if m.polling && msg.seq == m.pollSeq {
			m.succeed(opPoll)
		}
		return nil
	case tickMsg:
		return m.refresh()
	}
	if m.mode == modeFilter {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return cmd
	}
	return nil
}

// current is the selected source, or nil when there is none.
func (m *Model) current() *source {
	if m.srcIdx < 0 || m.srcIdx >= len(m.sources) {
		return nil
	}
	return &m.sources[m.srcIdx]
}

// selected is the capture under the list cursor.
func (m *Model) selected() (capture, bool) {
	if m.list.cursor < 0 || m.list.cursor >= len(m.list.items) {
		return capture{}, false
	}
	return m.list.items[m.list.cursor], true
}

// target is what an action applies to: the open capture in the detail pane
// when it has the focus, else the list's selection.
func (m *Model) target() (capture, bool) {
	if m.focus == paneDetail && m.detail.id != "" {
		for _, c := range m.list.items {
			if c.id() == m.detail.id {
				return c, true
			}
		}
		// Never fall back to the list's selection: that would act on
		// something other than what is on screen.
		switch {
		case m.detail.msg != nil:
			return capture{msg: &m.detail.msg.MessageSummary}, true
		case m.detail.req != nil:
			return capture{req: &m.detail.req.RequestSummary}, true
		}
		return capture{}, false
	}
	return m.selected()
}

func (m *Model) setNotice(text string, bad bool) { m.notice, m.noticeBad = text, bad }

// fail records err for o and schedules a retry with backoff.
func (m *Model) fail(o op, gen int, err error) tea.Cmd {
	if errors.Is(err, context.Canceled) && m.ctx.Err() != nil {
		return nil
	}
	m.attempts[o]++
	d := apiclient.Backoff(err, m.attempts[o], m.retryBase, m.retryMax)
	m.record(o, err, d)
	return tea.Tick(d, func(time.Time) tea.Msg { return retryMsg{op: o, gen: gen} })
}

func (m *Model) record(o op, err error, retryIn time.Duration) {
	m.refused(err)
	m.seq++
	m.errs[o], m.errSeq[o], m.retryIn[o] = err, m.seq, retryIn
}

// succeed clears o's error. An answer from the API also proves it
// reachable again, so every "cannot reach" goes with it.
func (m *Model) succeed(o op) {
	delete(m.errs, o)
	m.attempts[o] = 0
	for k, err := range m.errs {
		if errors.Is(err, apiclient.ErrUnreachable) {
			delete(m.errs, k)
		}
	}
}

// retry re-issues a failed call if it is still wanted.
func (m *Model) retry(r retryMsg) tea.Cmd {
	switch r.op {
	case opMe:
		if !m.haveMe {
			return loadMe(m.ctx, m.client)
		}
	case opSources:
		if !m.loaded {
			return loadSources(m.ctx, m.client)
		}
	case opList:
		if r.gen == m.list.gen && !m.list.loaded {
			return loadPage(m.ctx, m.client, m.list.gen, false, m.query())
		}
	case opOlder:
		if r.gen == m.list.gen {
			return m.loadOlder()
		}
	case opPoll:
		if r.gen == m.list.gen && !m.polling {
			return m.startPoll()
		}
	case opDetail:
		if m.detail.id != "" && !m.detail.loaded() {
			return loadDetail(m.ctx, m.client, m.detail.id, m.detail.kind)
		}
	}
	return nil
}

func (m *Model) refreshInterval() time.Duration {
	if m.refreshEvery > 0 {
		return m.refreshEvery
	}
	return refreshEvery
}

// refresh runs every few seconds (5 s): it reads the counts of every
// source, which no wait covers, and the newest captures of the list again
// (as many as are loaded, up to 100, with the filter's search), for the
// last delivery of each request shown and for captures deleted elsewhere.
func (m *Model) refresh() tea.Cmd {
	cmds := []tea.Cmd{tick(m.refreshInterval()), loadSources(m.ctx, m.client), m.refreshDeliveries()}
	if !m.haveMe {
		cmds = append(cmds, loadMe(m.ctx, m.client))
	}
	return tea.Batch(cmds...)
}

func (m *Model) applySources(msg sourcesMsg) tea.Cmd {
	if msg.err != nil {
		if !m.loaded {
			return m.fail(opSources, 0, msg.err)
		}
		m.record(opSources, msg.err, refreshEvery)
		return nil
	}
	m.succeed(opSources)
	old := map[string]source{}
	for _, s := range m.sources {
		old[s.id] = s
	}
	var selID string
	if cur := m.current(); cur != nil {
		selID = cur.id
	}
	next := make([]source, 0, len(msg.inboxes)+len(msg.endpoints))
	add := func(k sourceKind, id, name string, count int64) {
		s := source{kind: k, id: id, name: name, count: count, seen: count}
		if o, ok := old[id]; ok && id != selID {
			s.seen = min(o.seen, count)
		}
		next = append(next, s)
	}
	// The API lists newest first; oldest first puts the default ones on
	// top and new ones at the bottom, where they do not shift the rest.
	for i := len(msg.inboxes) - 1; i >= 0; i-- {
		in := msg.inboxes[i]
		add(kindInbox, in.ID, in.Name, in.MessageCount)
	}
	for i := len(msg.endpoints) - 1; i >= 0; i-- {
		e := msg.endpoints[i]
		add(kindEndpoint, e.ID, e.Name, e.RequestCount)
	}
	m.sources = next
	first := !m.loaded
	m.loaded = true
	m.srcIdx = -1
	for i, s := range next {
		if s.id == selID {
			m.srcIdx = i
		}
	}
	if m.srcIdx >= 0 {
		return nil
	}
	if len(next) == 0 {
		m.list = listState{gen: m.list.gen + 1, loaded: true}
		m.closeDetail()
		return nil
	}
	if !first {
		m.setNotice("the selected source is gone", true)
	}
	return m.selectSource(0)
}

// selectSource shows source i's captures and starts watching it.
func (m *Model) selectSource(i int) tea.Cmd {
	if cur := m.current(); cur != nil {
		cur.seen = cur.count
	}
	m.srcIdx = i
	m.closeDetail()
	return m.reloadList()
}

// query is the list call of the selected source with its filter.
func (m *Model) query() listQuery {
	src := m.current()
	if src == nil {
		return listQuery{}
	}
	return listQuery{kind: src.kind, id: src.id, f: m.list.f, limit: pageSize}
}

// reloadList loads the newest page of the selected source afresh; the
// long-poll restarts once it is in.
func (m *Model) reloadList() tea.Cmd {
	m.list = listState{gen: m.list.gen + 1}
	src := m.current()
	if src == nil {
		return nil
	}
	m.list.f, _ = parseFilter(src.kind, m.filters[src.id])
	if m.polling {
		m.pollCancel()
		m.pollRestart = true
	}
	return loadPage(m.ctx, m.client, m.list.gen, false, m.query())
}

func (m *Model) applyPage(msg pageMsg) tea.Cmd {
	if msg.gen != m.list.gen {
		return nil
	}
	if msg.older {
		m.list.loadingOlder = false
		if contract.IsCode(msg.err, contract.CodeInvalidCursor) {
			return m.reloadList() // the oldest capture shown was pruned meanwhile
		}
		if msg.err != nil {
			return m.fail(opOlder, msg.gen, msg.err)
		}
		m.succeed(opOlder)
		have := m.ids()
		for _, c := range msg.items {
			if !have[c.id()] {
				m.list.items = append(m.list.items, c)
			}
		}
		m.list.older = msg.next
		return m.fill()
	}
	if contract.IsCode(msg.err, contract.CodeInvalidParameter) {
		// The server refuses the filter (a search it cannot read): asking
		// again would change nothing, so the error stays until / changes it.
		m.record(opList, msg.err, 0)
		m.list.loaded = true
		return nil
	}
	if msg.err != nil {
		return m.fail(opList, msg.gen, msg.err)
	}
	m.succeed(opList)
	m.list.items, m.list.older, m.list.loaded = msg.items, msg.next, true
	m.list.cursor, m.list.offset = 0, 0
	return tea.Batch(m.startPoll(), m.follow(), m.fill())
}

// fill loads older pages while the list does not fill its pane, as on a
// tall terminal, or after captures left it.
func (m *Model) fill() tea.Cmd {
	if len(m.list.items) >= m.list.offset+m.listRows() {
		return nil
	}
	return m.loadOlder()
}

func (m *Model) ids() map[string]bool {
	have := make(map[string]bool, len(m.list.items))
	for _, c := range m.list.items {
		have[c.id()] = true
	}
	return have
}

// startPoll waits for captures newer than the newest shown. If a poll is
// still out, it is cancelled and the new one starts when it has returned.
func (m *Model) startPoll() tea.Cmd {
	if !m.list.loaded || m.current() == nil {
		return nil
	}
	if m.polling {
		m.pollCancel()
		m.pollRestart = true
		return nil
	}
	q := m.query()
	q.wait = pollWait
	if len(m.list.items) > 0 {
		q.after = m.list.items[0].id()
		q.limit = contract.MaxLimit
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.polling, m.pollCancel, m.pollGen = true, cancel, m.list.gen
	m.pollSeq++
	run := poll(ctx, m.client, m.list.gen, q)
	cmd := func() tea.Msg {
		defer cancel()
		return run()
	}
	if m.errs[opPoll] == nil {
		return cmd
	}
	// A wait that works holds without answering, so the error it follows
	// is cleared once the wait has lasted longer than any refusal takes.
	seq := m.pollSeq
	return tea.Batch(cmd, tea.Tick(pollSettle, func(time.Time) tea.Msg { return pollSettledMsg{seq} }))
}

func (m *Model) applyPoll(msg pollMsg) tea.Cmd {
	m.polling, m.pollCancel = false, nil
	if m.pollRestart || msg.gen != m.list.gen {
		m.pollRestart = false
		return m.startPoll()
	}
	if msg.err != nil {
		if contract.IsCode(msg.err, contract.CodeInvalidCursor) {
			// The newest capture shown was deleted elsewhere or pruned.
			return m.reloadList()
		}
		return m.fail(opPoll, msg.gen, msg.err)
	}
	m.succeed(opPoll)
	wasEmpty := len(m.list.items) == 0
	m.merge(msg.items)
	if wasEmpty && len(m.list.items) > 0 {
		m.list.older = msg.next // an uncursored poll returns the newest page
	}
	return tea.Batch(m.startPoll(), m.follow())
}

// merge puts newly arrived captures on top, marked fresh. The cursor keeps
// its capture, wherever it is: what is being read, or about to be acted
// on, is never swapped for a newcomer.
func (m *Model) merge(items []capture) {
	have := m.ids()
	var add []capture
	for _, c := range items {
		if !have[c.id()] {
			c.fresh = true
			add = append(add, c)
		}
	}
	if len(add) == 0 {
		return
	}
	m.list.items = append(add, m.list.items...)
	if len(m.list.items) > len(add) {
		m.list.cursor += len(add)
		if m.list.offset > 0 {
			m.list.offset += len(add) // the reader scrolled away: keep the view still
		}
	}
	m.clampList()
	if src := m.current(); src != nil {
		src.count += int64(len(add))
		src.seen = src.count
	}
}

// refreshDeliveries reads the newest captures of the list again (as many
// as are loaded, up to the API's largest page): the last delivery of each
// request, which a forwarding client records a moment after the capture,
// and which captures were deleted elsewhere since they were listed.
func (m *Model) refreshDeliveries() tea.Cmd {
	if m.current() == nil || m.deliveriesBusy || !m.list.loaded || len(m.list.items) == 0 {
		return nil
	}
	m.deliveriesBusy = true
	m.rechecked = m.ids()
	q := m.query()
	q.limit = max(pageSize, min(len(m.list.items), contract.MaxLimit))
	return loadDeliveries(m.ctx, m.client, m.list.gen, q)
}

func (m *Model) applyDeliveries(msg deliveriesMsg) tea.Cmd {
	m.deliveriesBusy = false
	if errors.Is(msg.err, context.Canceled) && m.ctx.Err() != nil {
		return nil
	}
	if msg.err != nil {
		m.record(opDeliveries, msg.err, m.refreshInterval())
		return nil
	}
	m.succeed(opDeliveries)
	if msg.gen != m.list.gen {
		return nil
	}
	there := make(map[string]bool, len(msg.items))
	for _, c := range msg.items {
		there[c.id()] = true
		if c.req != nil {
			m.setLastDelivery(c.req.ID, c.req.LastDelivery)
		}
	}
	// A capture listed but no longer in the answer, within the range the
	// answer covers, was deleted elsewhere. The range is found by position
	// in the list, which is the store's order: a capture's time is taken
	// before it is stored, so a later time can sit lower in the list.
	// The answer covers the list down to the lowest of its captures that
	// is listed, or the whole list when it goes on past that capture,
	// which then is the oldest listed (the list being the newest captures
	// without gaps), or when there is nothing older.
	pos := make(map[string]int, len(m.list.items))
	for i, c := range m.list.items {
		pos[c.id()] = i
	}
	low, beyond := -1, false
	for _, c := range msg.items {
		if i, ok := pos[c.id()]; ok {
			low, beyond = max(low, i), false
		} else if low >= 0 {
			beyond = true
		}
	}
	covered := low // rows above this index are covered
	if msg.all || beyond {
		covered = len(m.list.items)
	}
	var gone []string
	for i, c := range m.list.items {
		// Only those listed when the question was asked: one that
		// arrived since is newer than the answer.
		if i < covered && m.rechecked[c.id()] && !there[c.id()] {
			gone = append(gone, c.id())
		}
	}
	cmds := make([]tea.Cmd, 0, len(gone)+3)
	for _, id := range gone {
		cmds = append(cmds, m.removeRow(id))
	}
	if len(gone) == 0 {
		return nil
	}
	return tea.Batch(append(cmds, loadSources(m.ctx, m.client), m.startPoll(), m.follow(), m.fill())...)
}

// removeRow takes the capture id off the list, the cursor staying on the
// capture it was on, or the next older one, and closes its detail. The
// source's count is left to the caller. The
// next older page then starts below the new oldest listed: the deleted
// capture can no longer be asked for as its cursor.
func (m *Model) removeRow(id string) tea.Cmd {
	for i, c := range m.list.items {
		if c.id() != id {
			continue
		}
		m.list.items = append(m.list.items[:i], m.list.items[i+1:]...)
		if m.list.cursor > i || m.list.cursor >= len(m.list.items) {
			m.list.cursor = max(0, m.list.cursor-1)
		}
		break
	}
	m.clampList()
	if m.detail.id == id {
		m.closeDetail()
	}
	if m.list.older == id {
		if len(m.list.items) == 0 {
			return m.reloadList()
		}
		m.list.older = m.list.items[len(m.list.items)-1].id()
	}
	return nil
}

// setLastDelivery shows d as the last delivery of the request listed as id.
func (m *Model) setLastDelivery(id string, d *contract.DeliverySummary) {
	for _, c := range m.list.items {
		if c.req != nil && c.req.ID == id {
			c.req.LastDelivery = d
			return
		}
	}
}

func summarizeDelivery(d *contract.Delivery) *contract.DeliverySummary {
	if d == nil {
		return nil
	}
	return &contract.DeliverySummary{Kind: d.Kind, Status: d.Status, ResponseStatus: d.ResponseStatus, CreatedAt: d.CreatedAt}
}

// loadOlder fetches the page before the oldest capture shown.
func (m *Model) loadOlder() tea.Cmd {
	if !m.list.loaded || m.list.older == "" || m.list.loadingOlder {
		return nil
	}
	m.list.loadingOlder = true
	q := m.query()
	q.before = m.list.older
	return loadPage(m.ctx, m.client, m.list.gen, true, q)
}

// follow keeps the detail pane on the list's selection where both are on
// screen.
func (m *Model) follow() tea.Cmd {
	if !m.wide() {
		return nil
	}
	c, ok := m.selected()
	if !ok {
		m.closeDetail()
		return nil
	}
	if m.detail.id == c.id() {
		return nil
	}
	m.showDetail(c)
	// Holding a key down moves through many captures a second; only the
	// one the cursor rests on is fetched.
	id := c.id()
	return tea.Tick(followDelay, func(time.Time) tea.Msg { return detailDueMsg{id} })
}

// openDetail shows c in the detail pane and fetches it.
func (m *Model) openDetail(c capture) tea.Cmd {
	if m.detail.id == c.id() && (m.detail.loaded() || m.detail.err == nil) {
		return nil
	}
	m.showDetail(c)
	return loadDetail(m.ctx, m.client, c.id(), c.kind())
}

func (m *Model) showDetail(c capture) {
	if m.mode == modeLinks || m.mode == modeAttachments {
		m.mode = modeNormal // they listed the capture shown before
	}
	vp := m.detail.vp
	vp.SetContent("")
	vp.GotoTop()
	m.detail = detail{id: c.id(), kind: c.kind(), vp: vp}
	m.refreshDetail()
}

func (m *Model) closeDetail() {
	vp := m.detail.vp
	vp.SetContent("")
	m.detail = detail{vp: vp}
	if m.focus == paneDetail {
		m.focus = paneList
	}
	if m.mode == modeLinks || m.mode == modeAttachments {
		m.mode = modeNormal
	}
	m.pendingPick = modeNormal
	m.pendingCode = ""
}

func (m *Model) applyDetail(msg detailMsg) tea.Cmd {
	if msg.id != m.detail.id {
		return nil
	}
	if msg.err != nil {
		if contract.IsCode(msg.err, contract.CodeNotFound) {
			// Deleted elsewhere since it was listed.
			gone := m.removeRow(msg.id)
			m.setNotice("deleted elsewhere: "+msg.id, true)
			return tea.Batch(gone, loadSources(m.ctx, m.client), m.startPoll(), m.follow(), m.fill())
		}
		m.detail.err = msg.err
		m.refreshDetail()
		return m.fail(opDetail, 0, msg.err)
	}
	m.succeed(opDetail)
	m.detail.err = nil
	m.detail.msg, m.detail.req = msg.msg, msg.req
	if msg.req != nil {
		m.setLastDelivery(msg.req.ID, summarizeDelivery(lastDelivery(msg.req.Deliveries)))
	}
	m.refreshDetail()
	if p := m.pendingPick; p != modeNormal {
		m.pendingPick = modeNormal
		m.openPicker(p)
	}
	if m.pendingCode == msg.id {
		m.pendingCode = ""
		return m.copyCode()
	}
	return nil
}

func (m *Model) applyReplay(msg replayMsg) tea.Cmd {
	if m.refused(msg.err) {
		return nil
	}
	if msg.err != nil {
		if contract.IsCode(msg.err, contract.CodeNoTarget) {
			id := "ENDPOINT_ID"
			if src := m.current(); src != nil {
				id = src.id
			}
			m.setNotice("no target: capture endpoint set "+id+" --target URL", true)
			return nil
		}
		m.setNotice("replay failed: "+describe(msg.err), true)
		return nil
	}
	r := msg.replay
	m.replays[msg.id] = r
	m.setLastDelivery(msg.id, summarizeDelivery(&r.Delivery))
	m.setNotice("replay "+replaySummary(r), r.Status != contract.StatusDelivered)
	if m.detail.id == msg.id && m.detail.req != nil {
		m.detail.req.Deliveries = append(m.detail.req.Deliveries, r.Delivery)
		m.refreshDetail()
	}
	return nil
}

func (m *Model) applyDelete(msg deleteMsg) tea.Cmd {
	if m.refused(msg.err) {
		return nil
	}
	if msg.err != nil {
		m.setNotice("delete failed: "+describe(msg.err), true)
		return nil
	}
	if msg.gone {
		m.setNotice("already deleted "+msg.id, false)
	} else {
		m.setNotice("deleted "+msg.id, false)
	}
	// The count read last is from before this deletion, unless it was
	// deleted elsewhere first, which may be counted already: the sources
	// are read again at once either way. The list may have lost the row
	// already, reloaded when the long-poll found its cursor gone.
	if src := m.current(); !msg.gone && src != nil && src.count > 0 {
		src.count--
		src.seen = min(src.seen, src.count)
	}
	gone := m.removeRow(msg.id)
	// The long-poll may be waiting on the deleted capture as its cursor.
	return tea.Batch(gone, loadSources(m.ctx, m.client), m.startPoll(), m.follow(), m.fill())
}
