package awscall

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestMap(t *testing.T) {
	const r, a = "us-east-1", "111122223333"
	tbl := "arn:aws:dynamodb:us-east-1:111122223333:table/"
	tests := []struct {
		name, svc, op string
		in            any
		want          []Call
	}{
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
