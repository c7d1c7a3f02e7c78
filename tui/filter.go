package tui

import (
	"fmt"
	"strings"
)

// filter holds what the API filters a list by; which fields apply depends
// on the kind of source.
type filter struct {
	To, From, Subject string
	Method, Path      string
}

func (f filter) empty() bool { return f == filter{} }

// parseFilter reads what was typed after "/". For messages: "to:", "from:"
// and "subject:" terms, other words forming the subject. For requests:
// "method:" and "path:" terms, a word starting with "/" being a path and
// any other word a method.
func parseFilter(k sourceKind, text string) (filter, error) {
	var f filter
	var words []string
	for _, tok := range strings.Fields(text) {
		name, value, ok := strings.Cut(tok, ":")
		if ok && k == kindEndpoint && strings.HasPrefix(tok, "/") {
			ok = false // a path may contain a colon
		}
		if !ok {
			words = append(words, tok)
			continue
		}
		field := filterField(k, strings.ToLower(name))
		if field == nil {
			return filter{}, fmt.Errorf("unknown filter %q: %s", name+":", filterHint(k))
		}
		if value == "" {
			return filter{}, fmt.Errorf("%s: needs a value, e.g. %s", name+":", filterHint(k))
		}
		*field(&f) = value
	}
	switch k {
	case kindInbox:
		if len(words) > 0 {
			if f.Subject != "" {
				words = append([]string{f.Subject}, words...)
			}
			f.Subject = strings.Join(words, " ")
		}
	case kindEndpoint:
		f.Method = strings.ToUpper(f.Method)
		for _, w := range words {
			switch {
			case strings.HasPrefix(w, "/") && f.Path == "":
				f.Path = w
			case !strings.HasPrefix(w, "/") && f.Method == "":
				f.Method = strings.ToUpper(w)
			default:
				return filter{}, fmt.Errorf("%q: give one method and one path at most (%s)", w, filterHint(k))
			}
		}
	}
	return f, nil
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
		return "POST /hooks, method:PUT, path:/api"
	}
	return "to:bob from:shop subject:reset, or words of the subject"
}
