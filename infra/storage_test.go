package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

func TestTables(t *testing.T) {
	s := synth(t, nil)
	keyRef := map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::KMS::Key", "LedgerKey"), "Arn"}}
	check(t, "ledger table", func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy": "Retain",
			"Properties": map[string]any{
				"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
				"BillingMode":                      "PAY_PER_REQUEST",
				"StreamSpecification":              map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
				"TimeToLiveSpecification":          map[string]any{"AttributeName": "ttl", "Enabled": true},
				"DeletionProtectionEnabled":        true,
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
				"GlobalSecondaryIndexes": []any{map[string]any{
					"IndexName": "open",
					"KeySchema": []any{
						map[string]any{"AttributeName": "open_pk", "KeyType": "HASH"},
						map[string]any{"AttributeName": "open_due", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				}, map[string]any{
					"IndexName": "subject",
					"KeySchema": []any{
						map[string]any{"AttributeName": "subject_ref", "KeyType": "HASH"},
						map[string]any{"AttributeName": "created_at", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				}, map[string]any{
					"IndexName": "destination",
					"KeySchema": []any{
						map[string]any{"AttributeName": "destination_ref", "KeyType": "HASH"},
						map[string]any{"AttributeName": "created_at", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				}},
			},
		})
	})
	// An existing stack gets one new index per deploy: the first leaves out the subject index.
	check(t, "ledger table without the subject index", func() {
		checkWithoutSubjectIndex(t)
	})
	check(t, "content table", func() {
		s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "ttl", "Enabled": true},
			"StreamSpecification":              assertions.Match_Absent(),
			"GlobalSecondaryIndexes":           assertions.Match_Absent(),
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": false},
			"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
		})
	})
	check(t, "budget table", func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy": "Delete",
			"Properties": map[string]any{
				"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
				"BillingMode":                      "PAY_PER_REQUEST",
				"StreamSpecification":              assertions.Match_Absent(),
				"TimeToLiveSpecification":          assertions.Match_Absent(),
				"GlobalSecondaryIndexes":           assertions.Match_Absent(),
				"DeletionProtectionEnabled":        false,
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": false},
				"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
			},
		})
	})
	check(t, "attribute types", func() {
		s.template.AllResourcesProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"AttributeDefinitions": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{"AttributeName": "pk", "AttributeType": "S"})}),
		})
	})
	checkKeysRotate(t, s)
}

// checkKeysRotate: every symmetric encryption key rotates.
func checkKeysRotate(t *testing.T, s *synthesized) {
	t.Helper()
	// Every symmetric encryption key rotates; KMS rotates no HMAC key (the attempt proof key,
	// TestAttemptProofKey), which sets a KeySpec.
	for id, key := range s.resources("AWS::KMS::Key") {
		if spec := props(key)["KeySpec"]; (spec == nil || spec == "SYMMETRIC_DEFAULT") && props(key)["EnableKeyRotation"] != true {
			t.Errorf("key %s does not rotate", id)
		}
	}
}

// checkWithoutSubjectIndex: an existing stack gets one new index per deploy, the
// first leaves out the subject index; dispatch then neither reads the index
// (SUBJECT_INDEX) nor may query it.
func checkWithoutSubjectIndex(t *testing.T) {
	t.Helper()
	without := synth(t, func(p *LedgerStackProps) { p.SkipSubjectIndex = true })
	var names []any
	for _, table := range without.resources("AWS::DynamoDB::Table") {
		indexes, _ := props(table)["GlobalSecondaryIndexes"].([]any)
		for _, ix := range indexes {
			names = append(names, ix.(map[string]any)["IndexName"])
		}
	}
	if fmt.Sprint(names) != "[open destination]" {
		t.Errorf("indexes with SkipSubjectIndex: %v, want [open destination]", names)
	}
	// Dispatch then neither reads the index (SUBJECT_INDEX) nor may query it.
	vars := without.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if v, ok := vars["SUBJECT_INDEX"]; ok && v != "false" {
		t.Errorf("SUBJECT_INDEX = %v without the subject index", v)
	}
	for _, g := range without.grants(t)["Dispatch"] {
		if strings.Contains(g, "/index/subject") {
			t.Errorf("dispatch granted %s without the subject index", g)
		}
	}
}
