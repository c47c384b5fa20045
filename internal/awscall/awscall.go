// Package awscall records the AWS calls a function makes, as the IAM
// authorization requests they are on AWS: action, resource ARN and the
// condition keys the request carries (for KMS the key and the encryption
// context, for SES the from address).
//
// The local emulator enforces no IAM, so the tests enable this middleware on
// the functions' SDK configuration (the pipeline harness and the release
// gate), or the deployed functions log each call when LEDGER_AWSCALL_LOG=1,
// and infra's TestIAMCoverage evaluates every recorded call against the
// function's role and the key policies in the synthesized template.
//
// A call this package cannot map is recorded with an action of
// "unmapped:<service>:<operation>", which no policy allows: a new kind of
// call fails the coverage test until it is mapped here and granted.
package awscall

import (
	"context"
	"fmt"
	"net/mail"
	"net/url"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Call is one IAM authorization request made by a function.
type Call struct {
	Function  string            `json:"function"`
	Operation string            `json:"operation"` // SDK service id and operation, e.g. "DynamoDB.PutItem"
	Action    string            `json:"action"`    // IAM action, e.g. "dynamodb:PutItem"
	Resource  string            `json:"resource"`  // ARN, or "*" for actions without resource-level permissions
	Context   map[string]string `json:"context,omitempty"`
}

// Key identifies calls that are the same request.
func (c Call) Key() string {
	keys := make([]string, 0, len(c.Context))
	for k := range c.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s", c.Function, c.Action, c.Resource)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, c.Context[k])
	}
	return b.String()
}

// Sink receives every call; it must be safe for concurrent use.
type Sink func(ctx context.Context, c Call)

// Middleware returns an SDK API option that reports every call made with the
// configuration to sink as the calls of function. account is the account id
// used in ARNs when the context carries no Lambda invocation (whose function
// ARN names the account).
func Middleware(function, account string, sink Sink) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("RecordAWSCall",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				acct := account
				if lc, ok := lambdacontext.FromContext(ctx); ok {
					if parts := strings.Split(lc.InvokedFunctionArn, ":"); len(parts) > 4 && parts[4] != "" {
						acct = parts[4]
					}
				}
				svc, op, region := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), awsmiddleware.GetRegion(ctx)
				for _, c := range Map(svc, op, in.Parameters, region, acct) {
					c.Function = function
					sink(ctx, c)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// Map turns one SDK call into the IAM requests AWS authorizes for it.
func Map(service, operation string, input any, region, account string) []Call {
	base := Call{Operation: service + "." + operation}
	one := func(action, resource string, ctx map[string]string) []Call {
		c := base
		c.Action, c.Resource, c.Context = action, resource, ctx
		return []Call{c}
	}
	table := func(name string) string {
		if strings.HasPrefix(name, "arn:") {
			return name
		}
		return "arn:aws:dynamodb:" + region + ":" + account + ":table/" + name
	}
	switch in := input.(type) {
	// DynamoDB: the action is the operation; the resource the table, or the
	// index a Query or Scan names.
	case *dynamodb.PutItemInput:
		return one("dynamodb:PutItem", table(deref(in.TableName)), nil)
	case *dynamodb.GetItemInput:
		return one("dynamodb:GetItem", table(deref(in.TableName)), nil)
	case *dynamodb.UpdateItemInput:
		return one("dynamodb:UpdateItem", table(deref(in.TableName)), nil)
	case *dynamodb.DeleteItemInput:
		return one("dynamodb:DeleteItem", table(deref(in.TableName)), nil)
	case *dynamodb.QueryInput:
		return one("dynamodb:Query", index(table(deref(in.TableName)), deref(in.IndexName)), nil)
	case *dynamodb.ScanInput:
		return one("dynamodb:Scan", index(table(deref(in.TableName)), deref(in.IndexName)), nil)
	case *dynamodb.DescribeTableInput:
		return one("dynamodb:DescribeTable", table(deref(in.TableName)), nil)
	case *dynamodb.BatchGetItemInput:
		var out []Call
		for _, name := range sortedKeys(in.RequestItems) {
			out = append(out, one("dynamodb:BatchGetItem", table(name), nil)...)
		}
		return out
	case *dynamodb.BatchWriteItemInput:
		var out []Call
		for _, name := range sortedKeys(in.RequestItems) {
			out = append(out, one("dynamodb:BatchWriteItem", table(name), nil)...)
		}
		return out
	case *dynamodb.TransactWriteItemsInput:
		// Each item is authorized as its own single-item action.
		var out []Call
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				out = append(out, one("dynamodb:PutItem", table(deref(it.Put.TableName)), nil)...)
			case it.Update != nil:
				out = append(out, one("dynamodb:UpdateItem", table(deref(it.Update.TableName)), nil)...)
			case it.Delete != nil:
				out = append(out, one("dynamodb:DeleteItem", table(deref(it.Delete.TableName)), nil)...)
			case it.ConditionCheck != nil:
				out = append(out, one("dynamodb:ConditionCheckItem", table(deref(it.ConditionCheck.TableName)), nil)...)
			}
		}
		return out

	// KMS: the key, with the encryption context as condition keys.
	case *kms.DecryptInput:
		return one("kms:Decrypt", key(deref(in.KeyId), region, account), kmsContext(in.EncryptionContext, account))
	case *kms.GenerateDataKeyInput:
		return one("kms:GenerateDataKey", key(deref(in.KeyId), region, account), kmsContext(in.EncryptionContext, account))
	case *kms.EncryptInput:
		return one("kms:Encrypt", key(deref(in.KeyId), region, account), kmsContext(in.EncryptionContext, account))
	case *kms.DescribeKeyInput:
		return one("kms:DescribeKey", key(deref(in.KeyId), region, account), kmsContext(nil, account))

	// SES v2: the sending identity (the from address's domain) and the
	// configuration set, each with the from address as ses:FromAddress.
	case *sesv2.SendEmailInput:
		from := deref(in.FromEmailAddress)
		if a, err := mail.ParseAddress(from); err == nil {
			from = a.Address
		}
		_, domain, _ := strings.Cut(from, "@")
		ctx := map[string]string{"ses:FromAddress": from}
		out := one("ses:SendEmail", "arn:aws:ses:"+region+":"+account+":identity/"+domain, ctx)
		if cs := deref(in.ConfigurationSetName); cs != "" {
			out = append(out, one("ses:SendEmail", "arn:aws:ses:"+region+":"+account+":configuration-set/"+cs, ctx)...)
		}
		return out

	// GetAccount has no resource ARN: IAM authorizes it on "*".
	case *sesv2.GetAccountInput:
		return one("ses:GetAccount", "*", nil)

	// End User Messaging SMS: the origination identity when it is an ARN;
	// otherwise AWS picks one of the account's, which an account-wide
	// resource pattern covers.
	case *pinpointsmsvoicev2.SendTextMessageInput:
		res := deref(in.OriginationIdentity)
		if !strings.HasPrefix(res, "arn:") {
			if res == "" {
				res = "default"
			}
			res = "arn:aws:sms-voice:" + region + ":" + account + ":" + res
		}
		return one("sms-voice:SendTextMessage", res, nil)

	// SQS: the queue named by its URL.
	case *sqs.SendMessageInput:
		return one("sqs:SendMessage", queue(deref(in.QueueUrl), region), nil)
	case *sqs.SendMessageBatchInput:
		return one("sqs:SendMessage", queue(deref(in.QueueUrl), region), nil)
	case *sqs.ReceiveMessageInput:
		return one("sqs:ReceiveMessage", queue(deref(in.QueueUrl), region), nil)
	case *sqs.DeleteMessageInput:
		return one("sqs:DeleteMessage", queue(deref(in.QueueUrl), region), nil)
	}
	return one("unmapped:"+service+":"+operation, "*", nil)
}

func index(tableARN, name string) string {
	if name == "" {
		return tableARN
	}
	return tableARN + "/index/" + name
}

// key is the key ARN for a key id or ARN. An alias is recorded as the alias
// ARN: the coverage test then fails, because a policy on the key does not
// cover the alias name and the functions are meant to use key ARNs.
func key(id, region, account string) string {
	switch {
	case strings.HasPrefix(id, "arn:"):
		return id
	case strings.HasPrefix(id, "alias/"):
		return "arn:aws:kms:" + region + ":" + account + ":" + id
	case id == "":
		return "arn:aws:kms:" + region + ":" + account + ":key/(from ciphertext)"
	}
	return "arn:aws:kms:" + region + ":" + account + ":key/" + id
}

func kmsContext(ec map[string]string, account string) map[string]string {
	ctx := map[string]string{"kms:CallerAccount": account}
	for k, v := range ec {
		ctx["kms:EncryptionContext:"+k] = v
	}
	return ctx
}

// queue maps https://sqs.<region>.<host>/<account>/<name> (or an emulator's
// http://host/<account>/<name>) to the queue ARN.
func queue(u, region string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	parts := strings.Split(strings.Trim(p.Path, "/"), "/")
	if len(parts) < 2 {
		return u
	}
	return "arn:aws:sqs:" + region + ":" + parts[len(parts)-2] + ":" + parts[len(parts)-1]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
