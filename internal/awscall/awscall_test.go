package awscall

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Map reads the inputs' members by name; these cases pin every name it reads
// on the SDK's own input types and service ids, so an SDK rename fails here.
// TestMap is long because it is one table of cases, one SDK input and the
// calls it maps to each, and a loop that runs them.
func TestMap(t *testing.T) {
	const r, a = "us-east-1", "111122223333"
	tbl := "arn:aws:dynamodb:us-east-1:111122223333:table/"
	tests := []struct {
		name, svc, op string
		in            any
		want          []Call
	}{
		{"put item", dynamodb.ServiceID, "PutItem", &dynamodb.PutItemInput{TableName: aws.String("ledger")},
			[]Call{{Action: "dynamodb:PutItem", Resource: tbl + "ledger"}}},
		{"table arn", dynamodb.ServiceID, "GetItem", &dynamodb.GetItemInput{TableName: aws.String("arn:aws:dynamodb:eu-west-1:444455556666:table/t")},
			[]Call{{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:eu-west-1:444455556666:table/t"}}},
		{"update item", dynamodb.ServiceID, "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String("ledger")},
			[]Call{{Action: "dynamodb:UpdateItem", Resource: tbl + "ledger"}}},
		{"delete item", dynamodb.ServiceID, "DeleteItem", &dynamodb.DeleteItemInput{TableName: aws.String("content")},
			[]Call{{Action: "dynamodb:DeleteItem", Resource: tbl + "content"}}},
		{"describe table", dynamodb.ServiceID, "DescribeTable", &dynamodb.DescribeTableInput{TableName: aws.String("ledger")},
			[]Call{{Action: "dynamodb:DescribeTable", Resource: tbl + "ledger"}}},
		{"scan a table", dynamodb.ServiceID, "Scan", &dynamodb.ScanInput{TableName: aws.String("ledger")},
			[]Call{{Action: "dynamodb:Scan", Resource: tbl + "ledger"}}},
		{"batch write", dynamodb.ServiceID, "BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{"c": nil}},
			[]Call{{Action: "dynamodb:BatchWriteItem", Resource: tbl + "c"}}},
		{"transaction updates and deletes", dynamodb.ServiceID, "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Update: &ddbtypes.Update{TableName: aws.String("u")}}, {Delete: &ddbtypes.Delete{TableName: aws.String("d")}}}},
			[]Call{{Action: "dynamodb:UpdateItem", Resource: tbl + "u"}, {Action: "dynamodb:DeleteItem", Resource: tbl + "d"}}},
		{"kms generate mac", kms.ServiceID, "GenerateMac", &kms.GenerateMacInput{KeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/mac1"), Message: []byte("m")},
			[]Call{{Action: "kms:GenerateMac", Resource: "arn:aws:kms:us-east-1:111122223333:key/mac1", Context: map[string]string{"kms:CallerAccount": "111122223333"}}}},
		{"kms verify mac", kms.ServiceID, "VerifyMac", &kms.VerifyMacInput{KeyId: aws.String("mac1"), Message: []byte("m"), Mac: []byte("x")},
			[]Call{{Action: "kms:VerifyMac", Resource: "arn:aws:kms:us-east-1:111122223333:key/mac1", Context: map[string]string{"kms:CallerAccount": "111122223333"}}}},
		{"kms generate data key", kms.ServiceID, "GenerateDataKey", &kms.GenerateDataKeyInput{KeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/k2"), EncryptionContext: map[string]string{"purpose": "reset"}},
			[]Call{{Action: "kms:GenerateDataKey", Resource: "arn:aws:kms:us-east-1:111122223333:key/k2",
				Context: map[string]string{"kms:CallerAccount": a, "kms:EncryptionContext:purpose": "reset"}}}},
		{"kms encrypt under an alias", kms.ServiceID, "Encrypt", &kms.EncryptInput{KeyId: aws.String("alias/ledger")},
			[]Call{{Action: "kms:Encrypt", Resource: "arn:aws:kms:us-east-1:111122223333:alias/ledger", Context: map[string]string{"kms:CallerAccount": a}}}},
		{"kms describe key", kms.ServiceID, "DescribeKey", &kms.DescribeKeyInput{KeyId: aws.String("k1")},
			[]Call{{Action: "kms:DescribeKey", Resource: "arn:aws:kms:us-east-1:111122223333:key/k1", Context: map[string]string{"kms:CallerAccount": a}}}},
		{"kms sign with the digest key", kms.ServiceID, "Sign", &kms.SignInput{KeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/d1")},
			[]Call{{Action: "kms:Sign", Resource: "arn:aws:kms:us-east-1:111122223333:key/d1", Context: map[string]string{"kms:CallerAccount": a}}}},
		{"kms get public key", kms.ServiceID, "GetPublicKey", &kms.GetPublicKeyInput{KeyId: aws.String("d1")},
			[]Call{{Action: "kms:GetPublicKey", Resource: "arn:aws:kms:us-east-1:111122223333:key/d1", Context: map[string]string{"kms:CallerAccount": a}}}},
		{"s3 locked put", s3.ServiceID, "PutObject", &s3.PutObjectInput{Bucket: aws.String("dg"), Key: aws.String("digests/1.json"), ObjectLockMode: s3types.ObjectLockModeCompliance},
			[]Call{{Action: "s3:PutObject", Resource: "arn:aws:s3:::dg/digests/1.json"},
				{Action: "s3:PutObjectRetention", Resource: "arn:aws:s3:::dg/digests/1.json", Context: map[string]string{"s3:object-lock-mode": "COMPLIANCE"}}}},
		{"s3 head", s3.ServiceID, "HeadObject", &s3.HeadObjectInput{Bucket: aws.String("dg"), Key: aws.String("digests/2.json")},
			[]Call{{Action: "s3:GetObject", Resource: "arn:aws:s3:::dg/digests/2.json"}}},
		{"s3 get a version", s3.ServiceID, "GetObject", &s3.GetObjectInput{Bucket: aws.String("dg"), Key: aws.String("digests/2.json"), VersionId: aws.String("v1")},
			[]Call{{Action: "s3:GetObjectVersion", Resource: "arn:aws:s3:::dg/digests/2.json"}}},
		{"s3 list versions", s3.ServiceID, "ListObjectVersions", &s3.ListObjectVersionsInput{Bucket: aws.String("dg")},
			[]Call{{Action: "s3:ListBucketVersions", Resource: "arn:aws:s3:::dg"}}},
		{"s3 list", s3.ServiceID, "ListObjectsV2", &s3.ListObjectsV2Input{Bucket: aws.String("dg")},
			[]Call{{Action: "s3:ListBucket", Resource: "arn:aws:s3:::dg"}}},
		{"ses account", sesv2.ServiceID, "GetAccount", &sesv2.GetAccountInput{}, []Call{{Action: "ses:GetAccount", Resource: "*"}}},
		{"sms origination arn", pinpointsmsvoicev2.ServiceID, "SendTextMessage", &pinpointsmsvoicev2.SendTextMessageInput{OriginationIdentity: aws.String("arn:aws:sms-voice:us-east-1:111122223333:pool/p")},
			[]Call{{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:pool/p"}}},
		{"sms without origination", pinpointsmsvoicev2.ServiceID, "SendTextMessage", &pinpointsmsvoicev2.SendTextMessageInput{},
			[]Call{{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:default"}}},
		{"sms naming a configuration set and a protect configuration", pinpointsmsvoicev2.ServiceID, "SendTextMessage", &pinpointsmsvoicev2.SendTextMessageInput{
			OriginationIdentity: aws.String("arn:aws:sms-voice:us-east-1:111122223333:pool/p"), ConfigurationSetName: aws.String("stage-events"),
			ProtectConfigurationId: aws.String("protect-0123")},
			[]Call{{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:pool/p"},
				{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:configuration-set/stage-events"},
				{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:protect-configuration/protect-0123"}}},
		{"sms naming a protect configuration by ARN", pinpointsmsvoicev2.ServiceID, "SendTextMessage", &pinpointsmsvoicev2.SendTextMessageInput{
			ProtectConfigurationId: aws.String("arn:aws:sms-voice:us-east-1:111122223333:protect-configuration/protect-9")},
			[]Call{{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:default"},
				{Action: "sms-voice:SendTextMessage", Resource: "arn:aws:sms-voice:us-east-1:111122223333:protect-configuration/protect-9"}}},
		{"sqs batch send", sqs.ServiceID, "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://localhost:4566/000000000000/q")},
			[]Call{{Action: "sqs:SendMessage", Resource: "arn:aws:sqs:us-east-1:000000000000:q"}}},
		{"sqs receive", sqs.ServiceID, "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String("http://localhost:4566/000000000000/q")},
			[]Call{{Action: "sqs:ReceiveMessage", Resource: "arn:aws:sqs:us-east-1:000000000000:q"}}},
		{"sqs delete", sqs.ServiceID, "DeleteMessage", &sqs.DeleteMessageInput{QueueUrl: aws.String("http://localhost:4566/000000000000/q")},
			[]Call{{Action: "sqs:DeleteMessage", Resource: "arn:aws:sqs:us-east-1:000000000000:q"}}},
		{"an operation of a mapped service nobody mapped", kms.ServiceID, "ListKeys", &kms.ListKeysInput{}, []Call{{Action: "unmapped:KMS:ListKeys", Resource: "*"}}},
		{"query on an index", "DynamoDB", "Query", &dynamodb.QueryInput{TableName: aws.String("ledger"), IndexName: aws.String("open")},
			[]Call{{Action: "dynamodb:Query", Resource: tbl + "ledger/index/open"}}},
		{"batch get on two tables", "DynamoDB", "BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{"b": {}, "a": {}}},
			[]Call{{Action: "dynamodb:BatchGetItem", Resource: tbl + "a"}, {Action: "dynamodb:BatchGetItem", Resource: tbl + "b"}}},
		{"transaction items are single-item actions", "DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{TableName: aws.String("x")}}, {ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String("y")}}}},
			[]Call{{Action: "dynamodb:PutItem", Resource: tbl + "x"}, {Action: "dynamodb:ConditionCheckItem", Resource: tbl + "y"}}},
		{"kms decrypt with context", "KMS", "Decrypt", &kms.DecryptInput{KeyId: aws.String("k1"), EncryptionContext: map[string]string{"purpose": "reset"}},
			[]Call{{Action: "kms:Decrypt", Resource: "arn:aws:kms:us-east-1:111122223333:key/k1",
				Context: map[string]string{"kms:CallerAccount": a, "kms:EncryptionContext:purpose": "reset"}}}},
		{"ses identity and configuration set", "SESv2", "SendEmail", &sesv2.SendEmailInput{FromEmailAddress: aws.String("Reset <no-reply@mail.example.com>"), ConfigurationSetName: aws.String("cs")},
			[]Call{{Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:111122223333:identity/mail.example.com", Context: map[string]string{"ses:FromAddress": "no-reply@mail.example.com"}},
				{Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:111122223333:configuration-set/cs", Context: map[string]string{"ses:FromAddress": "no-reply@mail.example.com"}}}},
		{"sqs queue url", "SQS", "SendMessage", &sqs.SendMessageInput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/444455556666/intents")},
			[]Call{{Action: "sqs:SendMessage", Resource: "arn:aws:sqs:us-east-1:444455556666:intents"}}},
		{"secret by arn", secretsmanager.ServiceID, "GetSecretValue", &secretsmanager.GetSecretValueInput{
			SecretId: aws.String("arn:aws:secretsmanager:us-east-1:111122223333:secret:webhook-AbCdEf")},
			[]Call{{Action: "secretsmanager:GetSecretValue", Resource: "arn:aws:secretsmanager:us-east-1:111122223333:secret:webhook-AbCdEf"}}},
		{"secret by name", secretsmanager.ServiceID, "GetSecretValue", &secretsmanager.GetSecretValueInput{SecretId: aws.String("webhook")},
			[]Call{{Action: "secretsmanager:GetSecretValue", Resource: "arn:aws:secretsmanager:us-east-1:111122223333:secret:webhook"}}},
		{"unmapped", "STS", "GetCallerIdentity", struct{}{}, []Call{{Action: "unmapped:STS:GetCallerIdentity", Resource: "*"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Map(tc.svc, tc.op, tc.in, r, a)
			for i := range tc.want {
				tc.want[i].Operation = tc.svc + "." + tc.op
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
