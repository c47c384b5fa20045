package main

import (
	"strings"
	"testing"
)

// TestDataEventsTrail: dataEventsTrail=<name> creates that trail, logging the ledger table's write
// data events only, with log file validation, into its own encrypted, private bucket; without it
// there is no trail.
func TestDataEventsTrail(t *testing.T) {
	if n := len(synth(t, nil).resources("AWS::CloudTrail::Trail")); n != 0 {
		t.Errorf("trails without dataEventsTrail = %d, want 0", n)
	}

	s := synth(t, func(p *LedgerStackProps) { p.DataEventsTrail = "resetledger-test-ledger-writes" })
	trails := s.resources("AWS::CloudTrail::Trail")
	if len(trails) != 1 {
		t.Fatalf("trails = %d, want 1", len(trails))
	}
	var trail map[string]any
	for _, tr := range trails {
		trail = props(tr)
	}
	for k, want := range map[string]string{
		"TrailName":               `"resetledger-test-ledger-writes"`,
		"EnableLogFileValidation": `true`,
		"IsMultiRegionTrail":      `false`,
		"IsLogging":               `true`,
		"AdvancedEventSelectors": `[{"FieldSelectors":[{"Equals":["Data"],"Field":"eventCategory"},` +
			`{"Equals":["AWS::DynamoDB::Table"],"Field":"resources.type"},` +
			`{"Equals":[{"Fn::GetAtt":["` + s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable") + `","Arn"]}],"Field":"resources.ARN"},` +
			`{"Equals":["false"],"Field":"readOnly"}],"Name":"Writes to the ledger table"}]`,
	} {
		if got := mustJSON(trail[k]); got != want {
			t.Errorf("trail %s = %s, want %s", k, got, want)
		}
	}
	// Advanced selectors alone: a basic selector would add management events (or replace them).
	if _, ok := trail["EventSelectors"]; ok {
		t.Errorf("trail has basic event selectors too: %s", mustJSON(trail["EventSelectors"]))
	}
	if got := label(trail["KMSKeyId"]); got != "DataEventsTrailKey" {
		t.Errorf("trail key = %s, want DataEventsTrailKey", got)
	}
	if got := label(trail["S3BucketName"]); got != "DataEventsTrailBucket" {
		t.Errorf("trail bucket = %s, want DataEventsTrailBucket", got)
	}
	bucket := s.resources("AWS::S3::Bucket")[s.constructID(t, "AWS::S3::Bucket", "DataEventsTrailBucket")]
	enc := mustJSON(props(bucket)["BucketEncryption"])
	if !strings.Contains(enc, `"SSEAlgorithm":"aws:kms"`) || !strings.Contains(enc, "DataEventsTrailKey") {
		t.Errorf("trail bucket encryption = %s, want the trail's key", enc)
	}
	if got := mustJSON(props(bucket)["PublicAccessBlockConfiguration"]); got !=
		`{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}` {
		t.Errorf("trail bucket public access block = %s", got)
	}
	if bucket["DeletionPolicy"] != "Retain" {
		t.Errorf("trail bucket DeletionPolicy = %v, want Retain: the log outlives the stack", bucket["DeletionPolicy"])
	}
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "DataEventsTrailKey")])
	if policy := mustJSON(key["KeyPolicy"]); !strings.Contains(policy, `"Sid":"CloudTrailEncryptsThisTrail"`) ||
		!strings.Contains(policy, `:trail/resetledger-test-ledger-writes"`) {
		t.Errorf("trail key policy does not let CloudTrail encrypt for this trail only: %s", policy)
	}
	noNagErrors(t, s)

	p := testProps(t)
	p.DataEventsTrail = "-bad name"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "DataEventsTrail") {
		t.Errorf("Validate() with a bad trail name = %v", err)
	}
}
