package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inputs are the tools' inputs by tool name, for checkArguments.
type inputs map[string]input

// input is what checkArguments checks a tool's arguments against: its
// input schema, and which of its string arguments are ids of what kind.
type input struct {
	schema *jsonschema.Schema
	ids    map[string]idKind
}

// idKind is a kind of public id (store.NewID): its prefix, then letters
// and digits. An id argument is checked before any call, so that one with
// a slash or a query in it never reaches another API route, and an empty
// one is not a list's path.
type idKind struct {
	prefix string
	// what names the kind in a sentence; from says where ids of it are.
	what, from string
}

var (
	inboxID    = idKind{"inb_", "an inbox id", "list_inboxes"}
	endpointID = idKind{"whe_", "an endpoint id", "list_endpoints"}
	messageID  = idKind{"msg_", "a message id", "list_messages"}
	requestID  = idKind{"req_", "a request id", "list_requests"}
)

// maxIDLen bounds an id argument: store.NewID's are 24 characters after
// the prefix.
const maxIDLen = 64

// fits reports whether id is shaped like an id of kind k.
func (k idKind) fits(id string) bool {
	rest, ok := strings.CutPrefix(id, k.prefix)
	if !ok || rest == "" || len(rest) > maxIDLen {
		return false
	}
	for _, c := range []byte(rest) {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// shape says what an id of kind k looks like and where to get one.
func (k idKind) shape() string {
	return k.what + " (" + k.prefix + " then letters and digits, as " + k.from + " gives)"
}

// checkArguments runs before the schema validation of a tool's arguments
// (see arguments), whose messages are a validator's ("validating
// \"arguments\": … maximum: 31/1 is greater than 30"): it finds the same
// mistakes in a tool call's arguments and answers them as a tool error a
// model can act on (SPEC §12).
func (in inputs) checkArguments(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if call, ok := req.(*mcpsdk.CallToolRequest); ok && method == "tools/call" && call.Params != nil {
			if input, ok := in[call.Params.Name]; ok {
				if problems := input.problems(call.Params.Arguments); len(problems) > 0 {
					return toolFailure(explain(invalidArguments(problems))), nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

// invalidArguments is the invalid_parameter error naming each bad argument.
func invalidArguments(problems map[string]string) error {
	return &toolError{text: "invalid_parameter: " + joinProblems(problems) +
		". What to do: call again with these arguments corrected."}
}

func joinProblems(problems map[string]string) string {
	parts := []string{}
	for _, name := range slices.Sorted(maps.Keys(problems)) {
		parts = append(parts, name+" "+problems[name])
	}
	return strings.Join(parts, "; ")
}

// problems checks raw arguments against a tool's flat object schema:
// known names, required ones present, each of the declared type and
// within its bounds, the values of an object too, and each id shaped like
// one of its kind. It returns argument name → what is wrong.
func (in input) problems(raw json.RawMessage) map[string]string {
	s := in.schema
	problems := map[string]string{}
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			problems["arguments"] = "must be a JSON object of argument name → value"
			return problems
		}
	}
	known := slices.Sorted(maps.Keys(s.Properties))
	for name, value := range args {
		p, ok := s.Properties[name]
		if !ok {
			problems[name] = "is not an argument of this tool (it takes " + strings.Join(known, ", ") + ")"
			continue
		}
		if why := valueProblem(p, value); why != "" {
			problems[name] = why
			continue
		}
		if p.AdditionalProperties != nil {
			entries := map[string]json.RawMessage{}
			if json.Unmarshal(value, &entries) == nil {
				for key, v := range entries {
					if why := valueProblem(p.AdditionalProperties, v); why != "" {
						problems[fmt.Sprintf("%s[%q]", name, key)] = why
					}
				}
			}
		}
		if kind, ok := in.ids[name]; ok {
			if why := kind.problem(value, slices.Contains(s.Required, name)); why != "" {
				problems[name] = why
			}
		}
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			problems[name] = "is required"
			if kind, ok := in.ids[name]; ok {
				problems[name] += ": " + kind.shape()
			}
		}
	}
	return problems
}

// problem says what is wrong with an id argument's value, or "". An empty
// one is left out, unless the argument is required: an optional inbox or
// endpoint id then means the default one, an empty cursor the first page.
func (k idKind) problem(raw json.RawMessage, required bool) string {
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return "" // not a string: valueProblem says so
	}
	switch {
	case id == "" && required:
		return "is required: " + k.shape()
	case id == "", k.fits(id):
		return ""
	}
	const most = 80
	if len(id) > most {
		id = strings.ToValidUTF8(id[:most], "") + "…"
	}
	return fmt.Sprintf("must be %s (got %q)", k.shape(), id)
}

// valueProblem says what is wrong with one argument's value, or "".
func valueProblem(p *jsonschema.Schema, raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "is not valid JSON"
	}
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	if v == nil {
		if len(types) == 0 || slices.Contains(types, "null") {
			return ""
		}
		return "must not be null"
	}
	switch v := v.(type) {
	case float64:
		whole := v == math.Trunc(v)
		switch {
		case slices.Contains(types, "integer") && !whole:
			return fmt.Sprintf("must be a whole number (got %v)", v)
		case !slices.Contains(types, "integer") && !slices.Contains(types, "number") && len(types) > 0:
			return "must be " + typeName(p, types)
		case p.Minimum != nil && v < *p.Minimum, p.Maximum != nil && v > *p.Maximum:
			return fmt.Sprintf("must be from %v to %v (got %v)", bound0(p.Minimum), bound0(p.Maximum), v)
		}
	case string:
		if len(types) > 0 && !slices.Contains(types, "string") {
			return "must be " + typeName(p, types)
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, any(v)) {
			return fmt.Sprintf("must be one of %s (got %q)", enumList(p.Enum), v)
		}
	case bool:
		if len(types) > 0 && !slices.Contains(types, "boolean") {
			return "must be " + typeName(p, types)
		}
	case map[string]any:
		if len(types) > 0 && !slices.Contains(types, "object") {
			return "must be " + typeName(p, types)
		}
	case []any:
		if len(types) > 0 && !slices.Contains(types, "array") {
			return "must be " + typeName(p, types)
		}
		if p.Items != nil {
			for _, item := range v {
				b, _ := json.Marshal(item)
				if valueProblem(p.Items, b) != "" {
					return "must be " + typeName(p, types)
				}
			}
		}
	}
	return ""
}

func enumList(values []any) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = fmt.Sprint(v)
	}
	return strings.Join(out, ", ")
}

func bound0(b *float64) string {
	if b == nil {
		return "any"
	}
	return fmt.Sprint(*b)
}

// typeName says the JSON schema types of p the way a sentence does: "a
// string, a list of strings, or null".
func typeName(p *jsonschema.Schema, types []string) string {
	names := map[string]string{"integer": "a whole number", "number": "a number", "string": "a string",
		"boolean": "true or false", "object": "an object", "array": "an array", "null": "null"}
	plural := map[string]string{"integer": "whole numbers", "number": "numbers", "string": "strings",
		"boolean": "true or false values", "object": "objects"}
	out := []string{}
	for _, t := range types {
		name := names[t]
		if t == "array" && p.Items != nil && plural[p.Items.Type] != "" {
			name = "a list of " + plural[p.Items.Type]
		}
		out = append(out, name)
	}
	if len(out) <= 2 {
		return strings.Join(out, " or ")
	}
	return strings.Join(out[:len(out)-1], ", ") + ", or " + out[len(out)-1]
}
