package tui

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// filter holds what the API filters a list by; which fields apply depends
// on the kind of source.
type filter struct {
	To, From, Subject string
	Method, Path      string
	// Q is a full-text search (SPEC §16): words and "quoted phrases".
	Q string
}

func (f filter) empty() bool { return f == filter{} }

// parseFilter reads what was typed after "/". For messages: "to:", "from:"
// and "subject:" terms. For requests: "method:" and "path:" terms, a word
// starting with "/" being a path and an HTTP method's name a method. Any
// other word, and any "quoted phrase", is searched for (q). A term's value
// may be quoted to hold spaces: subject:"password reset".
func parseFilter(k sourceKind, text string) (filter, error) {
	var f filter
	terms, err := splitTerms(text)
	if err != nil {
		return filter{}, err
	}
	var search []string
	for _, term := range terms {
		name, value, ok := strings.Cut(term, ":")
		switch {
		case strings.HasPrefix(term, `"`):
			ok = false // a phrase may contain a colon
		case k == kindEndpoint && strings.HasPrefix(term, "/"):
			ok = false // so may a path
		case strings.Contains(term, "://"):
			ok = false // and a URL, which is searched for
		}
		if !ok {
			used := false
			if k == kindEndpoint {
				if used, err = requestWord(&f, term); err != nil {
					return filter{}, err
				}
			}
			if !used {
				search = append(search, term)
			}
			continue
		}
		field := filterField(k, strings.ToLower(name))
		if field == nil {
			return filter{}, fmt.Errorf("unknown filter %q: %s (to search for a word with a colon, quote it)", name+":", filterHint(k))
		}
		value = strings.Trim(value, `"`)
		if value == "" {
			return filter{}, fmt.Errorf("%s: needs a value, e.g. %s", name+":", filterHint(k))
		}
		*field(&f) = value
	}
	f.Method = strings.ToUpper(f.Method)
	if len(search) > 0 {
		if !slices.ContainsFunc(search, hasLetterOrDigit) {
			return filter{}, fmt.Errorf("nothing to search for in %s: give a word with letters or digits", strings.Join(search, " "))
		}
		f.Q = strings.Join(search, " ")
	}
	return f, nil
}

// splitTerms splits text at spaces outside quotation marks, keeping the
// marks.
func splitTerms(text string) ([]string, error) {
	var terms []string
	var term strings.Builder
	quoted := false
	for _, r := range text {
		switch {
		case r == '"':
			quoted = !quoted
		case unicode.IsSpace(r) && !quoted:
			if term.Len() > 0 {
				terms = append(terms, term.String())
				term.Reset()
			}
			continue
		}
		term.WriteRune(r)
	}
	if quoted {
		return nil, fmt.Errorf(`a quotation mark is not closed: end the phrase with "`)
	}
	if term.Len() > 0 {
		terms = append(terms, term.String())
	}
	return terms, nil
}

// requestWord takes a bare word of a request filter as its path or method,
// and reports whether it did.
func requestWord(f *filter, w string) (bool, error) {
	isPath := strings.HasPrefix(w, "/")
	isMethod := slices.Contains(httpMethods, strings.ToUpper(w))
	switch {
	case isPath && f.Path == "":
		f.Path = w
	case isMethod && f.Method == "":
		f.Method = w
	case isPath || isMethod:
		return true, fmt.Errorf("%q: give one method and one path at most (%s)", w, filterHint(kindEndpoint))
	default:
		return false, nil
	}
	return true, nil
}

// httpMethods are the words a request filter reads as a method; any other
// method is given as method:NAME.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}

func hasLetterOrDigit(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
}

func filterField(k sourceKind, name string) func(*filter) *string {
	switch {
	case k == kindInbox && name == "to":
		return func(f *filter) *string { return &f.To }
	case k == kindInbox && name == "from":
		return func(f *filter) *string { return &f.From }
	case k == kindInbox && (name == "subject" || name == "s"):
		return func(f *filter) *string { return &f.Subject }
	case k == kindEndpoint && name == "method":
		return func(f *filter) *string { return &f.Method }
	case k == kindEndpoint && name == "path":
		return func(f *filter) *string { return &f.Path }
	}
	return nil
}

func filterHint(k sourceKind) string {
	if k == kindEndpoint {
		return `POST /hooks, method:PUT, path:/api, other words and "phrases" searched for`
	}
	return `to:bob from:shop subject:reset, other words and "phrases" searched for`
}
