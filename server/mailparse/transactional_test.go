package mailparse

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// transactionalDir holds mail in the styles real senders use, and
// expected.json says what each must yield: its codes, most likely first,
// and every link with its kind, in order.
const transactionalDir = "../../testdata/transactional"

type expectedMail struct {
	Style string   `json:"style"`
	Codes []string `json:"codes"`
	Links []struct {
		URL  string `json:"url"`
		Kind string `json:"kind"`
	} `json:"links"`
}

func loadTransactional(t testing.TB) (map[string]expectedMail, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(transactionalDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]expectedMail
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(transactionalDir, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	return want, names
}

// scores counts what the detectors got right over the corpus.
type scores struct {
	codeTP, codeFP, codeFN int
	withCode, firstRight   int // messages with a code; those whose first code is right
	withoutCode, noneFound int // messages without; those where none was reported
	links, linksRight      int
	kindTP, kindFP, kindFN map[string]int
}

func (s *scores) codes(got, want []string) {
	for _, g := range got {
		if slices.Contains(want, g) {
			s.codeTP++
		} else {
			s.codeFP++
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			s.codeFN++
		}
	}
	if len(want) > 0 {
		s.withCode++
		if len(got) > 0 && got[0] == want[0] {
			s.firstRight++
		}
	} else {
		s.withoutCode++
		if len(got) == 0 {
			s.noneFound++
		}
	}
}

func (s *scores) link(got, want string) {
	if s.kindTP == nil {
		s.kindTP, s.kindFP, s.kindFN = map[string]int{}, map[string]int{}, map[string]int{}
	}
	if want != "" {
		s.links++
	}
	switch {
	case got == want:
		s.linksRight++
		s.kindTP[got]++
	default:
		if got != "" {
			s.kindFP[got]++
		}
		if want != "" {
			s.kindFN[want]++
		}
	}
}

func ratio(n, d int) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f (%d/%d)", float64(n)/float64(d), n, d)
}

func (s *scores) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "codes: precision %s, recall %s; first code right in %s messages with one; none reported in %s messages without\n",
		ratio(s.codeTP, s.codeTP+s.codeFP), ratio(s.codeTP, s.codeTP+s.codeFN),
		ratio(s.firstRight, s.withCode), ratio(s.noneFound, s.withoutCode))
	fmt.Fprintf(&b, "link kinds: %s links right\n", ratio(s.linksRight, s.links))
	for _, k := range []string{KindVerify, KindReset, KindLogin, KindUnsubscribe, KindOther} {
		tp := s.kindTP[k]
		fmt.Fprintf(&b, "  %-11s precision %s, recall %s\n", k, ratio(tp, tp+s.kindFP[k]), ratio(tp, tp+s.kindFN[k]))
	}
	return b.String()
}

// TestTransactionalCorpus checks every message of the corpus against its
// expectations and reports precision and recall of codes and link kinds
// (go test -run TransactionalCorpus -v shows them).
func TestTransactionalCorpus(t *testing.T) {
	want, names := loadTransactional(t)
	if len(names) < 40 {
		t.Errorf("corpus has %d messages, want at least 40", len(names))
	}
	for name := range want {
		if !slices.Contains(names, name) {
			t.Errorf("expected.json names %s, which is not in the corpus", name)
		}
	}
	var s scores
	for _, name := range names {
		w, ok := want[name]
		if !ok {
			t.Errorf("%s has no entry in expected.json", name)
			continue
		}
		raw, err := os.ReadFile(filepath.Join(transactionalDir, name))
		if err != nil {
			t.Fatal(err)
		}
		m := Parse(raw)
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, c := range m.Codes {
				got = append(got, c.Value)
				if c.Context == "" || utf8.RuneCountInString(c.Context) > contextRunes {
					t.Errorf("code %s: context %q", c.Value, c.Context)
				}
			}
			s.codes(got, w.Codes)
			if !slices.Equal(got, w.Codes) {
				t.Errorf("codes = %q, want %q (%s)\ncontexts: %+v", got, w.Codes, w.Style, m.Codes)
			}
			gotKind := map[string]string{}
			var gotURLs, wantURLs []string
			for _, l := range m.Links {
				gotKind[l.URL] = l.Kind
				gotURLs = append(gotURLs, l.URL)
			}
			for _, l := range w.Links {
				wantURLs = append(wantURLs, l.URL)
				s.link(gotKind[l.URL], l.Kind)
				if k, ok := gotKind[l.URL]; !ok {
					t.Errorf("link %s not found", l.URL)
				} else if k != l.Kind {
					t.Errorf("link %s: kind %s, want %s", l.URL, k, l.Kind)
				}
			}
			for _, u := range gotURLs {
				if !slices.Contains(wantURLs, u) {
					s.link(gotKind[u], "")
					t.Errorf("unexpected link %s (%s)", u, gotKind[u])
				}
			}
			if !slices.Equal(gotURLs, wantURLs) && len(gotURLs) == len(wantURLs) {
				t.Errorf("links in order %q, want %q", gotURLs, wantURLs)
			}
		})
	}
	t.Logf("over %d messages:\n%s", len(names), s.report())
}

// BenchmarkParseTransactional parses the messages of the transactional
// corpus in turn: the cost of parsing a typical message, codes and link
// kinds included.
func BenchmarkParseTransactional(b *testing.B) {
	_, names := loadTransactional(b)
	raws := make([][]byte, len(names))
	total := 0
	for i, name := range names {
		raw, err := os.ReadFile(filepath.Join(transactionalDir, name))
		if err != nil {
			b.Fatal(err)
		}
		raws[i], total = raw, total+len(raw)
	}
	b.SetBytes(int64(total / len(raws)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Parse(raws[i%len(raws)])
		i++
	}
}
