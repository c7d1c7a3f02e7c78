package web

import (
	"testing"

	"github.com/capturedev/capture/store"
)

// The page shows a name as sent, control characters aside; the download's
// name also leaves no directory, quote or backslash, and falls back to the
// id with the type's extension.
func TestAttachmentNames(t *testing.T) {
	for _, tt := range []struct {
		filename, contentType, shown, download string
	}{
		{`invoice "<x>".pdf`, "application/pdf", `invoice "<x>".pdf`, `invoice _<x>_.pdf`},
		{"../../etc/pass\x01wd", "text/plain", "../../etc/pass\x5fwd", "pass_wd"},
		{"tab\there.txt", "text/plain", "tab_here.txt", "tab_here.txt"},
		{`C:\Users\a\report.pdf`, "application/pdf", `C:\Users\a\report.pdf`, "report.pdf"},
		{"", "application/pdf", "att_1.pdf", "att_1.pdf"},
		{" \x02 ", "application/pdf", "_", "_"},
	} {
		a := store.Attachment{ID: "att_1", Filename: tt.filename, ContentType: tt.contentType}
		if got := shownFilename(a); got != tt.shown {
			t.Errorf("shown %q: %q, want %q", tt.filename, got, tt.shown)
		}
		if got := attachmentName(a); got != tt.download {
			t.Errorf("download %q: %q, want %q", tt.filename, got, tt.download)
		}
	}
}
