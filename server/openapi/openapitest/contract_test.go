package openapitest

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/getkin/kin-openapi/openapi3"
)

// TestContractTypesMatchDocument checks that every wire type of the
// contract carries exactly the properties its schema documents, nested
// objects included, so that a field added on one side and not the other
// fails here even before a test sends it.
func TestContractTypesMatchDocument(t *testing.T) {
	doc := newValidator(t).doc
	for schema, value := range map[string]any{
		"Me":              contract.Me{},
		"Inbox":           contract.Inbox{},
		"Endpoint":        contract.Endpoint{},
		"Address":         contract.Address{},
		"MessageSummary":  contract.MessageSummary{},
		"Message":         contract.Message{},
		"Link":            contract.Link{},
		"Code":            contract.Code{},
		"Attachment":      contract.Attachment{},
		"RequestSummary":  contract.RequestSummary{},
		"Request":         contract.Request{},
		"Delivery":        contract.Delivery{},
		"DeliverySummary": contract.DeliverySummary{},
		"ReplayResult":    contract.Replay{},
		"ReplayRequest":   contract.ReplayEdits{},
		"DeliveryReport":  contract.DeliveryReport{},
	} {
		ref := doc.Components.Schemas[schema]
		if ref == nil {
			t.Errorf("schema %s is not in the document", schema)
			continue
		}
		compareFields(t, schema, reflect.TypeOf(value), ref.Value)
	}
}

var (
	marshaler   = reflect.TypeFor[json.Marshaler]()
	contractPkg = reflect.TypeFor[contract.Me]().PkgPath()
)

// writesItself reports whether typ is written by a MarshalJSON of its own
// (contract.Time, contract.Headers), not field by field.
func writesItself(typ reflect.Type) bool {
	return typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler)
}

// compareFields compares the JSON fields of the struct type typ with the
// properties of s, and recurses into nested objects.
func compareFields(t *testing.T, path string, typ reflect.Type, s *openapi3.Schema) {
	t.Helper()
	fields := jsonFields(typ)
	props := properties(s)
	if props == nil {
		t.Errorf("%s: %s is a struct, the document no object with properties", path, typ)
		return
	}
	got, want := slices.Sorted(maps.Keys(fields)), slices.Sorted(maps.Keys(props))
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s has fields %v, the document %v", path, typ, got, want)
	}
	for name, ft := range fields {
		prop := props[name]
		if prop == nil {
			continue
		}
		for !writesItself(ft) && (ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice) {
			ft = ft.Elem()
			if prop.Value != nil && prop.Value.Items != nil {
				prop = prop.Value.Items
			}
		}
		// Only the contract's own structs are compared: a time or an
		// http.Header is a value on the wire, not an object of fields.
		if ft.Kind() != reflect.Struct || writesItself(ft) || ft.Name() != "" && ft.PkgPath() != contractPkg {
			continue
		}
		compareFields(t, path+"."+name, ft, prop.Value)
	}
}

// jsonFields lists the JSON names of typ's fields, those of embedded
// structs included, with their types.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			maps.Copy(out, jsonFields(f.Type))
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		out[cmp.Or(tag, f.Name)] = f.Type
	}
	return out
}

// properties are the properties of an object schema, through allOf and
// the object branch of a oneOf with null; nil when s is no such object.
func properties(s *openapi3.Schema) map[string]*openapi3.SchemaRef {
	if s == nil {
		return nil
	}
	var out map[string]*openapi3.SchemaRef
	add := func(props openapi3.Schemas) {
		if len(props) == 0 {
			return
		}
		if out == nil {
			out = map[string]*openapi3.SchemaRef{}
		}
		maps.Copy(out, props)
	}
	add(s.Properties)
	for _, part := range s.AllOf {
		add(properties(part.Value))
	}
	for _, part := range s.OneOf {
		add(properties(part.Value))
	}
	return out
}

// The document's enums are the contract's words, in the contract's order.
func TestEnumsMatchContract(t *testing.T) {
	doc := newValidator(t).doc
	s := doc.Components.Schemas
	for _, tc := range []struct {
		where  string
		schema *openapi3.Schema
		want   []string
	}{
		{"LinkKind", s["LinkKind"].Value, contract.LinkKinds},
		{"Delivery.kind", s["Delivery"].Value.Properties["kind"].Value, []string{contract.KindReplay, contract.KindForward}},
		{"DeliverySummary.kind", s["DeliverySummary"].Value.Properties["kind"].Value, []string{contract.KindReplay, contract.KindForward}},
		{"Delivery.status", s["Delivery"].Value.Properties["status"].Value, []string{contract.StatusDelivered, contract.StatusFailed}},
		{"DeliverySummary.status", s["DeliverySummary"].Value.Properties["status"].Value, []string{contract.StatusDelivered, contract.StatusFailed}},
	} {
		var got []string
		for _, v := range tc.schema.Enum {
			got = append(got, v.(string))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s enum = %v, want %v", tc.where, got, tc.want)
		}
	}
}

// The caps the document states for a delivery report are the contract's.
func TestDeliveryCapsMatchContract(t *testing.T) {
	props := newValidator(t).doc.Components.Schemas["DeliveryReport"].Value.Properties
	if got := props["target_url"].Value.MaxLength; got == nil || *got != contract.MaxDeliveryTargetURL {
		t.Errorf("target_url maxLength = %v, want %d", got, contract.MaxDeliveryTargetURL)
	}
	if got := props["error"].Value.MaxLength; got == nil || *got != contract.MaxDeliveryError {
		t.Errorf("error maxLength = %v, want %d", got, contract.MaxDeliveryError)
	}
	if got := props["duration_ms"].Value.Max; got == nil || *got != contract.MaxDeliveryDurationMS {
		t.Errorf("duration_ms maximum = %v, want %d", got, contract.MaxDeliveryDurationMS)
	}
}

// A delivery report the server refuses (neither a response status nor an
// error) is one the document refuses too, so a generated client cannot send
// it believing it valid.
func TestDeliveryReportNeedsStatusOrError(t *testing.T) {
	v := newValidator(t)
	for body, ok := range map[string]bool{
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":0}`:                                       false,
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":0,"response_status":null,"error":null}`:   false,
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":0,"error":""}`:                            false,
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":3,"response_status":204}`:                 true,
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":3,"error":"connection refused"}`:          true,
		`{"target_url":"http://127.0.0.1:3000/hook","duration_ms":3,"response_status":502,"error":"reset"}`: true,
	} {
		if err := v.CheckSchema("DeliveryReport", []byte(body)); (err == nil) != ok {
			t.Errorf("%s: valid %v, want %v (%v)", body, err == nil, ok, err)
		}
	}
}
