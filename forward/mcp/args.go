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

// inputs are the tools' input schemas by tool name, for checkArguments.
type inputs map[string]*jsonschema.Schema

// checkArguments runs before the schema validation of a tool's arguments
// (see arguments), whose messages are a validator's ("validating
// \"arguments\": … maximum: 31/1 is greater than 30"): it finds the same
// mistakes in a tool call's arguments and answers them as a tool error a
// model can act on (SPEC §12).
func (in inputs) checkArguments(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if call, ok := req.(*mcpsdk.CallToolRequest); ok && method == "tools/call" && call.Params != nil {
			if schema := in[call.Params.Name]; schema != nil {
				if problems := argumentProblems(schema, call.Params.Arguments); len(problems) > 0 {
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

// argumentProblems checks raw arguments against a tool's flat object
// schema: known names, required ones present, each of the declared type
// and within its bounds. It returns argument name → what is wrong.
func argumentProblems(s *jsonschema.Schema, raw json.RawMessage) map[string]string {
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
		}
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			problems[name] = "is required"
		}
	}
	return problems
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
			return "must be " + typeName(types)
		case p.Minimum != nil && v < *p.Minimum, p.Maximum != nil && v > *p.Maximum:
			return fmt.Sprintf("must be from %v to %v (got %v)", bound0(p.Minimum), bound0(p.Maximum), v)
		}
	case string:
		if len(types) > 0 && !slices.Contains(types, "string") {
			return "must be " + typeName(types)
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, any(v)) {
			return fmt.Sprintf("must be one of %s (got %q)", enumList(p.Enum), v)
		}
	case bool:
		if len(types) > 0 && !slices.Contains(types, "boolean") {
			return "must be " + typeName(types)
		}
	case map[string]any:
		if len(types) > 0 && !slices.Contains(types, "object") {
			return "must be " + typeName(types)
		}
	case []any:
		if len(types) > 0 && !slices.Contains(types, "array") {
			return "must be " + typeName(types)
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

// typeName says a JSON schema type the way a sentence does.
func typeName(types []string) string {
	names := map[string]string{"integer": "a whole number", "number": "a number", "string": "a string",
		"boolean": "true or false", "object": "an object", "array": "an array", "null": "null"}
	out := []string{}
	for _, t := range types {
		out = append(out, names[t])
	}
	return strings.Join(out, " or ")
}
