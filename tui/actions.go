package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	osc52 "github.com/aymanbagabas/go-osc52/v2"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// openBrowser hands url to the system's opener. It waits only for the
// opener itself, which returns once the browser has the URL.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("%s: %w: %s", cmd.Args[0], err, s)
		}
		return fmt.Errorf("%s: %w", cmd.Args[0], err)
	}
	return nil
}

// openLink opens url in a browser or, where there is none (an SSH session,
// a container), puts it on the clipboard instead.
func openLink(open func(string) error, out io.Writer, url string) tea.Cmd {
	return func() tea.Msg {
		if err := open(url); err != nil {
			how, cerr := copyText(out, url)
			if cerr != nil {
				return noticeMsg{err: fmt.Errorf("cannot open a browser (%v) nor copy the link", err)}
			}
			// What happened first: the opener's own words (xdg-open lists
			// every browser it tried) are cut to fit the status line.
			verb := "copied"
			if how == copiedPassthrough {
				verb = "sent" // tmux may drop it
			}
			return noticeMsg{text: verb + " the link (" + how.String() + "); no browser opened it (" + err.Error() + ")"}
		}
		return noticeMsg{text: "opened " + url}
	}
}

// copyToClipboard copies text and says where to: "copied " + what + " to
// …".
func copyToClipboard(out io.Writer, text, what string) tea.Cmd {
	return func() tea.Msg {
		how, err := copyText(out, text)
		if err != nil {
			return noticeMsg{err: fmt.Errorf("copy: %w", err)}
		}
		switch how {
		case copiedTmux:
			return noticeMsg{text: "copied " + what + " to tmux's paste buffer"}
		case copiedPassthrough:
			return noticeMsg{text: "sent " + what + " to the clipboard (OSC 52 through tmux, which drops it unless allow-passthrough is on)"}
		}
		return noticeMsg{text: "copied " + what + " to the clipboard (OSC 52)"}
	}
}

// copied says where copyText put the text.
type copied int

const (
	copiedOSC52       copied = iota // OSC 52 to the terminal
	copiedTmux                      // tmux's paste buffer
	copiedPassthrough               // OSC 52 wrapped for tmux's passthrough
)

func (c copied) String() string {
	switch c {
	case copiedTmux:
		return "tmux buffer"
	case copiedPassthrough:
		return "OSC 52 through tmux"
	}
	return "OSC 52"
}

// tmuxTimeout bounds each tmux call: a stuck tmux server must not hold a
// copy for ever.
var tmuxTimeout = 2 * time.Second

// copyText puts text where it can be pasted, and says where.
// Inside tmux it becomes tmux's paste buffer: with -w (tmux 3.2 and
// later) tmux also hands it to the outer terminal's clipboard where its
// set-clipboard option allows; an older tmux, which has no -w, takes it
// into the buffer alone. tmux 3.3 drops OSC 52 wrapped for passthrough
// unless allow-passthrough is on, and an unwrapped one unless
// set-clipboard is on, so the wrapped one is the last resort inside
// tmux. Elsewhere OSC 52 reaches the clipboard of the machine the
// terminal runs on, also across SSH, where the terminal honours it.
func copyText(out io.Writer, text string) (copied, error) {
	seq := osc52.New(text)
	if os.Getenv("TMUX") != "" {
		for _, args := range [][]string{{"load-buffer", "-w", "-"}, {"load-buffer", "-"}} {
			if runTmux(text, args...) == nil {
				return copiedTmux, nil
			}
		}
		_, err := seq.Tmux().WriteTo(out)
		return copiedPassthrough, err
	}
	if strings.HasPrefix(os.Getenv("TERM"), "screen") {
		seq = seq.Screen()
	}
	_, err := seq.WriteTo(out)
	return copiedOSC52, err
}

// runTmux runs tmux with args and stdin, for tmuxTimeout at most.
func runTmux(stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), tmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = tmuxTimeout
	return cmd.Run()
}

// saveAttachment writes an attachment into dir under its own name, never
// over an existing file.
func saveAttachment(ctx context.Context, c *apiclient.Client, dir, messageID string, a contract.Attachment) tea.Cmd {
	return func() tea.Msg {
		data, _, err := c.AttachmentData(ctx, messageID, a.ID)
		if err != nil {
			return savedMsg{err: err}
		}
		path, err := writeNew(dir, saveName(a), data)
		return savedMsg{path: path, err: err}
	}
}

// attachmentLabel is how an attachment is listed: its file name, or a
// mark that the sender gave it none.
func attachmentLabel(a contract.Attachment) string {
	if strings.TrimSpace(a.Filename) == "" {
		return "(no name)"
	}
	return clean(a.Filename)
}

// saveName is the file an attachment is saved as: its own name made safe,
// else its id with the extension of its content type, which is what opens
// it with the right program.
func saveName(a contract.Attachment) string {
	return safeName(a.Filename, a.ID+contract.FileExtension(a.ContentType))
}

// safeName keeps a sender-chosen file name from leaving the directory or
// hiding itself.
func safeName(name, fallback string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = filepath.Base(name)
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == ':' {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if name == "" {
		return fallback
	}
	return name
}

func writeNew(dir, name string, data []byte) (string, error) {
	if dir == "" {
		dir = "."
	}
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 0; i < 1000; i++ {
		n := name
		if i > 0 {
			n = stem + "-" + strconv.Itoa(i) + ext
		}
		path := filepath.Join(dir, n)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, werr := f.Write(data)
		if err := errors.Join(werr, f.Close()); err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("%s: too many files of that name", filepath.Join(dir, name))
}

// replaySummary is one line on what a replay got.
func replaySummary(r contract.Replay) string {
	took := strconv.FormatInt(r.DurationMS, 10) + " ms"
	if r.ResponseStatus != nil {
		return "→ " + strconv.Itoa(*r.ResponseStatus) + " " + http.StatusText(*r.ResponseStatus) + " in " + took + " (" + r.Status + ")"
	}
	msg := r.Status
	if r.Error != nil {
		msg = *r.Error
	}
	return "failed after " + took + ": " + msg
}
