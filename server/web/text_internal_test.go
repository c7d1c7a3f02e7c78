package web

import (
	"strings"
	"testing"
)

// An HTML body just past the converted part's bound, by any number of
// bytes, is cut and converted (it once sliced past its end).
func TestTextOfHTMLCutsJustPastTheBound(t *testing.T) {
	for extra := 1; extra <= 5; extra++ {
		doc := "<p>" + strings.Repeat("é", maxSourceShown) // two bytes each: cuts land inside one too
		doc = doc[:maxSourceShown+extra]
		text, cut := textOfHTML(doc)
		if !cut || text == "" || !strings.HasPrefix(text, "é") {
			t.Errorf("%d bytes past the bound: cut %v, text %.20q", extra, cut, text)
		}
	}
}
