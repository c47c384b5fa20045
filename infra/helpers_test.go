package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/iampolicy"
	"github.com/resetledger/resetledger/internal/settings"
)

// stubAssets writes <dir>/<fn>/bootstrap for every function, so tests need no prior build.
func stubAssets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range append(slices.Clone(settings.Functions), settings.Operate, settings.Digest) {
		if err := os.MkdirAll(filepath.Join(dir, string(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		stub := []byte("#!/bin/sh\necho stub " + string(name) + "\n") // distinct content, distinct assets
		if err := os.WriteFile(filepath.Join(dir, string(name), "bootstrap"), stub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testProps is a valid production-like stage with stub assets.
func testProps(t *testing.T) *LedgerStackProps {
	p := DefaultLedgerStackProps("test")
	p.AssetDir = stubAssets(t)
	p.Functions.SESFrom = "no-reply@mail.example.com"
	p.AlarmTopicArn = testTopic
	p.ProducerPrincipalArns = []string{producerARN}
	p.OperatorPrincipalArns = []string{oncallARN}
	p.DataEventsTrail = testTrail
	return p
}

// testTrail is the test stage's data-events trail.
const testTrail = "resetledger-test-ledger-writes"

const testTopic = "arn:aws:sns:us-east-1:111122223333:oncall"

// cdkContext returns the feature flags from cdk.json, so tests synthesize what `cdk synth` does.
func cdkContext(t *testing.T) map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		App     string                 `json:"app"`
		Context map[string]interface{} `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	return cfg.Context
}

type synthesized struct {
	stack    awscdk.Stack
	template assertions.Template
	json     map[string]any
}

// synth builds the stack from props (after mutate) with cdk-nag's AwsSolutions pack applied.
func synth(t *testing.T, mutate func(*LedgerStackProps)) *synthesized {
	t.Helper()
	props := testProps(t)
	if mutate != nil {
		mutate(props)
	}
	return synthProps(t, props)
}

// synthProps builds the stack from props with cdk-nag's AwsSolutions pack applied.
func synthProps(t *testing.T, props *LedgerStackProps) *synthesized {
	t.Helper()
	ctx := cdkContext(t)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
	stack, err := NewLedgerStack(app, "Test", props)
	if err != nil {
		t.Fatalf("NewLedgerStack: %v", err)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	tpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return &synthesized{stack: stack, template: tpl, json: doc}
}

// check runs a jsii assertion, turning its panic into a test error.
func check(t *testing.T, what string, assert func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assert()
}

// resources returns the template's resources of one type, keyed by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// logicalID finds the one resource of typ whose logical id starts with prefix.
func (s *synthesized) logicalID(t *testing.T, typ, prefix string) string {
	t.Helper()
	var ids []string
	for id := range s.resources(typ) {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with logical id %s*, got %v", typ, prefix, ids)
	}
	return ids[0]
}

// constructID finds the one resource of typ whose construct name (logical id without CDK's hash) is
// name: DispatchQueue, not DispatchQueueDlq. The IAM check binds recorded names to these.
func (s *synthesized) constructID(t *testing.T, typ, name string) string {
	t.Helper()
	var ids []string
	for id := range s.resources(typ) {
		if iampolicy.ConstructName(id) == name {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with construct name %s, got %v", typ, name, ids)
	}
	return ids[0]
}

func (s *synthesized) function(t *testing.T, name settings.Role) map[string]any {
	t.Helper()
	for _, r := range s.resources("AWS::Lambda::Function") {
		if props(r)["FunctionName"] == "resetledger-test-"+string(name) {
			return props(r)
		}
	}
	t.Fatalf("no function named resetledger-test-%s", name)
	return nil
}

var logicalSuffix = regexp.MustCompile(`[0-9A-F]{8}$`)

// label renders an ARN expression readably: {"Fn::GetAtt":["LedgerTableAB12CD34","Arn"]} -> LedgerTable.
func label(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if ga, ok := x["Fn::GetAtt"].([]any); ok {
			id := logicalSuffix.ReplaceAllString(ga[0].(string), "")
			if ga[1] == "Arn" {
				return id
			}
			return id + "." + ga[1].(string)
		}
		if ref, ok := x["Ref"].(string); ok {
			return logicalSuffix.ReplaceAllString(ref, "")
		}
		if j, ok := x["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, label(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// grants returns the "action on resource" pairs each role's inline policies allow.
func (s *synthesized) grants(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, pol := range s.resources("AWS::IAM::Policy") {
		pp := props(pol)
		for _, role := range list(pp["Roles"]) {
			name := strings.TrimSuffix(label(role), "Role")
			for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
				stmt := st.(map[string]any)
				if stmt["Effect"] != "Allow" {
					t.Errorf("role %s: unexpected %v statement", name, stmt["Effect"])
				}
				for _, a := range list(stmt["Action"]) {
					for _, r := range list(stmt["Resource"]) {
						out[name] = append(out[name], fmt.Sprintf("%s on %s", a, label(r)))
					}
				}
			}
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func join(parts ...[]string) []string { return slices.Concat(parts...) }

// noNagErrors fails on any unsuppressed cdk-nag AwsSolutions error and checks every suppression's reason.
func noNagErrors(t *testing.T, s *synthesized) {
	t.Helper()
	for _, m := range *assertions.Annotations_FromStack(s.stack).FindError(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("cdk-nag %s: %v", *m.Id, m.Entry.Data)
	}
	for id, r := range s.json["Resources"].(map[string]any) {
		md, _ := r.(map[string]any)["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		for _, sup := range list(nag["rules_to_suppress"]) {
			if sup == nil {
				continue
			}
			reason, _ := sup.(map[string]any)["reason"].(string)
			if len(reason) < 60 {
				t.Errorf("%s: suppression %v has no real reason", id, sup)
			}
		}
	}
}

// docSection returns the text of the Markdown page doc (a path from the repository root, such
// as docs/configuration.md) under heading, up to the next heading of the same or a higher level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut("\n"+string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", doc, heading)
	}
	for depth := 1; depth <= strings.Index(heading, " "); depth++ {
		section, _, _ = strings.Cut(section, "\n"+strings.Repeat("#", depth)+" ")
	}
	return section
}

// tableRows returns the cells of every markdown table row in text whose first cell matches first,
// trimmed, without the outer pipes.
func tableRows(text string, first *regexp.Regexp) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if first.MatchString(cells[0]) {
			rows = append(rows, cells)
		}
	}
	return rows
}

// defaultCell is how docs/configuration.md writes a declared default.
func defaultCell(def string, required bool) string {
	switch {
	case required:
		return "required"
	case def == "":
		return "-"
	}
	return "`" + def + "`"
}
