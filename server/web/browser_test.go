package web_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// chromium finds the browser the tests drive. Without one they skip, and
// say so, except under CI, where a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAPTURE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (install the chromium package, or set CAPTURE_CHROMIUM)")
	}
	t.Skip("SKIP: no Chromium found; the browser tests need one (install chromium, or set CAPTURE_CHROMIUM)")
	return ""
}

// browser is one headless Chromium tab pointed at an env.
type browser struct {
	t         *testing.T
	e         *env
	ctx       context.Context
	downloads string

	mu sync.Mutex
	// alerts are alert() dialogs: nothing the interface does opens one, so
	// each is captured content that ran.
	alerts []string
	// confirms are the questions of confirm() dialogs, all answered yes.
	confirms []string
	// problems are script errors and security messages of the interface's
	// own pages (not of a message's sandboxed HTML).
	problems []string
	// sandboxLog holds the console lines of messages' sandboxed HTML.
	sandboxLog []string
}

type viewport struct {
	width, height int64
	mobile, dark  bool
}

var desktop = viewport{width: 1280, height: 800}

// stepTimeout bounds each browser step, so a missing element fails the
// test with a message instead of hanging it. Steps wait for conditions,
// never for time, so the bound only has to be generous: a loaded machine
// running the tests with -race is slow, not wrong.
const stepTimeout = 60 * time.Second

func newBrowser(t *testing.T, e *env, vp viewport) *browser {
	t.Helper()
	path := chromium(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(vp.width), int(vp.height)),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser for the life of ctx, so it cannot
	// take a context with a deadline of its own; it is waited for here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(stepTimeout):
		t.Fatalf("chromium did not start within %s", stepTimeout)
	}
	b := &browser{t: t, e: e, ctx: ctx, downloads: t.TempDir()}

	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			accept := ev.Type == page.DialogTypeConfirm
			b.mu.Lock()
			if accept {
				b.confirms = append(b.confirms, ev.Message)
			} else {
				b.alerts = append(b.alerts, string(ev.Type)+": "+ev.Message)
			}
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}
	}()
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			b.mu.Lock()
			if strings.Contains(m.URL, "/html") {
				b.sandboxLog = append(b.sandboxLog, m.Text)
			} else if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				b.problems = append(b.problems, fmt.Sprintf("%s %s: %s", m.Type, m.URL, m.Text))
			}
			b.mu.Unlock()
		}
	}()

	for _, perm := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: perm, AllowWithoutSanitization: true},
			Setting:    cdpbrowser.PermissionSettingGranted, Origin: e.base,
		}); err != nil {
			t.Fatalf("grant %s: %v", perm, err)
		}
	}
	events := true
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: b.downloads, EventsEnabled: &events,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	b.setViewport(vp)
	return b
}

// setViewport sizes the page and picks its colour scheme.
func (b *browser) setViewport(vp viewport) {
	b.t.Helper()
	var opts []chromedp.EmulateViewportOption
	if vp.mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	scheme := "light"
	if vp.dark {
		scheme = "dark"
	}
	b.do(chromedp.EmulateViewport(vp.width, vp.height, opts...))
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		b.t.Fatal(err)
	}
}

// do runs steps, each bounded by stepTimeout.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	for _, s := range steps {
		run(b, s)
	}
}

// run runs one action, bounded by stepTimeout. Just after a page loads,
// Chromium may still name the old page's script context; an action sent
// to it never ran, so it is sent again.
func run[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	for {
		v, err := chromedp.Run(ctx, a)
		if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && ctx.Err() == nil {
			continue
		}
		if err != nil {
			b.t.Fatalf("browser: %v (on %s)", err, b.location())
		}
		return v
	}
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	u, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	return u
}

func (b *browser) open(url string) {
	b.t.Helper()
	if strings.HasPrefix(url, "/") {
		url = b.e.base + url
	}
	b.do(chromedp.Navigate(url))
}

// openStatus opens a page of the interface and returns its HTTP status.
func (b *browser) openStatus(path string) int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(b.e.base+path))
	if err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
	return int(resp.Status)
}

// byRole finds elements as assistive technology does: by their computed
// role and accessible name.
func byRole(role, name string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, n *chromedp.Node) ([]cdp.NodeID, error) {
		res, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{
			NodeID: n.NodeID, Role: role, AccessibleName: name,
		})
		if err != nil {
			return nil, err
		}
		var ids []cdp.BackendNodeID
		for _, ax := range res.Nodes {
			if !ax.Ignored && ax.BackendDOMNodeID != 0 {
				ids = append(ids, ax.BackendDOMNodeID)
			}
		}
		if len(ids) == 0 {
			return nil, nil
		}
		pushed, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend,
			dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: ids})
		return pushed.NodeIDs, err
	})
}

// scope narrows a query to the inside of an element found by role and name.
func (b *browser) scope(role, name string) chromedp.QueryOption {
	b.t.Helper()
	nodes := run(b, chromedp.Nodes(role+" "+name, byRole(role, name), chromedp.NodeVisible))
	return chromedp.FromNode(nodes[0])
}

func label(role, name string) string { return role + " " + strconvQuote(name) }

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// click clicks the control with the mouse, as a person would.
func (b *browser) click(role, name string, in ...chromedp.QueryOption) {
	b.t.Helper()
	b.do(chromedp.Click(label(role, name), append(in, byRole(role, name))...))
}

// clickAndLoad clicks a control that loads another page and waits for it.
func (b *browser) clickAndLoad(role, name string, in ...chromedp.QueryOption) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(label(role, name), append(in, byRole(role, name))...)); err != nil {
		b.t.Fatalf("click %s: %v (on %s)", label(role, name), err, b.location())
	}
}

// fill types into the text field with this label.
func (b *browser) fill(name, text string, in ...chromedp.QueryOption) {
	b.t.Helper()
	b.typeInto("textbox", name, text, in...)
}

// typeInto replaces the value of a field (a textbox, a spinbutton…).
func (b *browser) typeInto(role, name, text string, in ...chromedp.QueryOption) {
	b.t.Helper()
	sel := label(role, name)
	opts := append(in, byRole(role, name))
	clear := chromedp.QueryAfter(sel, func(ctx context.Context, t *chromedp.Target, nodes []*chromedp.Node) (chromedp.Void, error) {
		obj, err := cdp.Call(ctx, t, dom.ResolveNode, dom.ResolveNodeParams{NodeID: nodes[0].NodeID})
		if err != nil {
			return chromedp.Void{}, err
		}
		_, err = cdp.Call(ctx, t, cdpruntime.CallFunctionOn, cdpruntime.CallFunctionOnParams{
			FunctionDeclaration: "function() { this.value = '' }", ObjectID: obj.Object.ObjectID})
		return chromedp.Void{}, err
	}, opts...)
	b.do(clear, chromedp.SendKeys(sel, text, opts...))
}

// value reads a form field's value.
func (b *browser) value(role, name string, in ...chromedp.QueryOption) string {
	b.t.Helper()
	return run(b, chromedp.Value(label(role, name), append(in, byRole(role, name))...))
}

// has reports whether a visible element with this role and name exists now.
func (b *browser) has(role, name string) bool {
	b.t.Helper()
	ids := run(b, chromedp.QueryNodeIDs(label(role, name), byRole(role, name), chromedp.AtLeast(0)))
	return len(ids) > 0
}

// waitFor waits until a JavaScript condition holds on the page.
func (b *browser) waitFor(condition string) {
	b.t.Helper()
	run(b, chromedp.Poll[bool](condition, chromedp.WithPollingTimeout(stepTimeout)))
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return run(b, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// clipboard reads what the page copied.
func (b *browser) clipboard() string {
	b.t.Helper()
	return eval[string](b, `navigator.clipboard.readText()`)
}

// download clicks a link that downloads a file and returns the file.
func (b *browser) download(role, name string, in ...chromedp.QueryOption) (string, []byte) {
	b.t.Helper()
	// The events are followed on the step's deadline, which ends them: a
	// download that never begins or never ends fails the test.
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	progress := chromedp.BrowserEvents(ctx, cdpbrowser.DownloadProgress)
	begun := chromedp.BrowserEvents(ctx, cdpbrowser.DownloadWillBegin)
	b.click(role, name, in...)
	var suggested string
	for ev, err := range begun {
		if err != nil {
			b.t.Fatalf("no download began: %v", err)
		}
		suggested = ev.SuggestedFilename
		break
	}
	for ev, err := range progress {
		if err != nil {
			b.t.Fatalf("download did not finish: %v", err)
		}
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			data, err := os.ReadFile(filepath.Join(b.downloads, suggested))
			if err != nil {
				b.t.Fatal(err)
			}
			return suggested, data
		}
		if ev.State == cdpbrowser.DownloadProgressStateCanceled {
			b.t.Fatal("download canceled")
		}
	}
	b.t.Fatal("the browser stopped reporting the download")
	return "", nil
}

// checkClean fails the test if captured content ran or a page of the
// interface broke its own policy.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.alerts {
		b.t.Errorf("a dialog opened: %s", a)
	}
	for _, p := range b.problems {
		b.t.Errorf("page problem: %s", p)
	}
}

// signIn signs in with a fresh one-time link, through the page.
func (b *browser) signIn() {
	b.t.Helper()
	b.open(b.e.loginLink(b.t))
	b.waitFor(`document.querySelector("form.signout") !== null`)
}

// textOf reads the text of the first visible element matching css.
func textOf(css string) chromedp.Action[string] {
	return chromedp.Text(chromedp.CSS(css), chromedp.NodeVisible)
}

// clickCSSAndLoad clicks the first element matching css and waits for the
// page it loads.
func (b *browser) clickCSSAndLoad(css string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		b.t.Fatalf("click %s: %v (on %s)", css, err, b.location())
	}
}

// inFrame runs an action in the message's sandboxed HTML frame. Chromium
// runs a sandboxed frame in a process of its own, as a target of its own,
// so the action is sent to that target.
func inFrame[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	b.waitFor(`document.querySelector("iframe.mail-html") !== null`)
	src := eval[string](b, `document.querySelector("iframe.mail-html").src`)
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	// The frame's target appears once the frame starts loading: look, and
	// look again at each change of a target until it is there.
	nextChange, stop := iter.Pull2(chromedp.BrowserEvents(ctx, target.TargetInfoChanged))
	defer stop()
	var infos []*target.Info
	for {
		var err error
		if infos, err = chromedp.Targets(ctx); err != nil {
			b.t.Fatalf("targets: %v", err)
		}
		for _, info := range infos {
			if info.Type != "iframe" || info.URL != src {
				continue
			}
			frameCtx, cancelFrame := chromedp.NewContext(b.ctx, chromedp.WithTargetID(info.TargetID), chromedp.WithDetachOnCancel())
			defer cancelFrame()
			fctx, fcancel := context.WithTimeout(frameCtx, stepTimeout)
			defer fcancel()
			v, err := chromedp.Run(fctx, a)
			if err != nil {
				b.t.Fatalf("in the frame: %v", err)
			}
			return v
		}
		if _, err, ok := nextChange(); !ok || err != nil {
			break
		}
	}
	b.t.Fatalf("no frame target for %s among %d targets", src, len(infos))
	var zero T
	return zero
}

// frameText waits for an element in the message's HTML frame and returns
// its text.
func (b *browser) frameText(css string) string {
	b.t.Helper()
	return inFrame(b, chromedp.Text(chromedp.CSS(css), chromedp.NodeVisible))
}

// frameEval evaluates an expression in the message's HTML frame.
func (b *browser) frameEval(expr string) string {
	b.t.Helper()
	return inFrame(b, chromedp.Evaluate[string](`String((`+expr+`) ?? "")`))
}

// pressAndLoad types keys that load another page, and waits for it.
func (b *browser) pressAndLoad(keys string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.KeyEvent(keys)); err != nil {
		b.t.Fatalf("keys %q: %v (on %s)", keys, err, b.location())
	}
}

// typeKey presses one printable key as a keyboard does: one keyDown that
// carries the text, so that a page which cancels the keydown also stops
// the character (chromedp.KeyEvent sends the character separately).
func (b *browser) typeKey(key, code string, keyCode int64) {
	b.t.Helper()
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeKeyDown, input.DispatchKeyEventTypeKeyUp} {
			p := input.DispatchKeyEventParams{Type: typ, Key: key, Code: code,
				WindowsVirtualKeyCode: keyCode, NativeVirtualKeyCode: keyCode}
			if typ == input.DispatchKeyEventTypeKeyDown {
				p.Text = key
			}
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
				return err
			}
		}
		return nil
	}))
}

// asked reports whether a confirm() dialog asked something starting so.
func (b *browser) asked(prefix string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.confirms {
		if strings.HasPrefix(q, prefix) {
			return true
		}
	}
	return false
}
