package intent_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/intent"
)

const schemaPath = "../../schema/intent-v3.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema { return compileSchemaAt(t, schemaPath) }

func compileSchemaAt(t *testing.T, schemaPath string) *jsonschema.Schema {
	t.Helper()
	abs, err := filepath.Abs(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	sch, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPath, err)
	}
	return sch
}

func schemaAccepts(t *testing.T, sch *jsonschema.Schema, body []byte) (bool, error) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	err = sch.Validate(doc)
	return err == nil, err
}

func TestSchemaRequiredFieldsMatchDecode(t *testing.T) {
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Required             []string                   `json:"required"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if !reflect.DeepEqual(s.Required, intent.RequiredFields()) {
		t.Errorf("schema required = %v, Decode requires %v", s.Required, intent.RequiredFields())
	}
	for _, f := range append(intent.RequiredFields(), intent.OptionalFields()...) {
		if _, ok := s.Properties[f]; !ok {
			t.Errorf("schema has no property %s", f)
		}
	}
	if want := len(intent.RequiredFields()) + len(intent.OptionalFields()); len(s.Properties) != want {
		t.Errorf("schema has %d properties, want %d (the required fields and the optional ones)", len(s.Properties), want)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Error("schema must set additionalProperties false")
	}
}

func TestSchemaAgreesWithDecode(t *testing.T) {
	sch := compileSchema(t)

	t.Run("valid documents", func(t *testing.T) {
		single := validDoc(t)
		fallback := validDoc(t)
		fallback["workflow"] = map[string]any{"kind": "fallback", "order": []any{"sms", "email"}}
		fallback["expires_at"] = "2026-11-30T10:10:00.25+01:00"
		dual := validDoc(t)
		dual["channel"] = "sms"
		dual["workflow"] = map[string]any{"kind": "dual", "order": []any{"email", "sms"}}
		withSubject := validDoc(t)
		withSubject["subject_ref"] = "acct-1001"
		for name, doc := range map[string]map[string]any{"single": single, "fallback": fallback, "dual": dual, "with subject_ref": withSubject} {
			body := marshal(t, doc)
			if _, err := intent.Decode(body); err != nil {
				t.Errorf("%s: Decode rejects: %v", name, err)
			}
			if ok, err := schemaAccepts(t, sch, body); !ok {
				t.Errorf("%s: schema rejects: %v", name, err)
			}
		}
	})

	for _, tc := range badCases() {
		if tc.decodeOnly != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body(t)
			if _, err := intent.Decode(body); err == nil {
				t.Fatal("Decode accepts")
			}
			if ok, _ := schemaAccepts(t, sch, body); ok {
				t.Errorf("schema accepts a document Decode rejects (field %s)", tc.field)
			}
		})
	}
}

// TestSchemasAcceptTheirVectors: every body of testdata/vectors/intents.json
// (version 3) is valid under intent-v3.schema.json and none under
// intent-v2.schema.json, and every body of the frozen testdata/vectors/v2
// under intent-v2.schema.json and none under version 3's: each schema
// names the vectors of its own version.
func TestSchemasAcceptTheirVectors(t *testing.T) {
	v2, v3 := compileSchemaAt(t, "../../schema/intent-v2.schema.json"), compileSchema(t)
	for _, tc := range []struct {
		file       string
		own, other *jsonschema.Schema
	}{{"intents.json", v3, v2}, {"dictionary.json", v3, v2}, {"v2/intents.json", v2, v3}} {
		var doc struct {
			Vectors []struct {
				Name string `json:"name"`
				Body string `json:"body"`
			} `json:"vectors"`
		}
		vectors.Load(t, tc.file, &doc)
		if len(doc.Vectors) == 0 {
			t.Fatalf("%s: no vectors", tc.file)
		}
		for _, v := range doc.Vectors {
			if ok, err := schemaAccepts(t, tc.own, []byte(v.Body)); !ok {
				t.Errorf("%s %s: its schema rejects it: %v", tc.file, v.Name, err)
			}
			if ok, _ := schemaAccepts(t, tc.other, []byte(v.Body)); ok {
				t.Errorf("%s %s: the other version's schema accepts it", tc.file, v.Name)
			}
		}
	}
}
