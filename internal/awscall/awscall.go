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
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
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
	iters := &iterators{stream: map[string]string{}}
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
				stream := ""
				if svc == streamsService && op == "GetRecords" {
					stream = iters.take(members{reflect.Indirect(reflect.ValueOf(in.Parameters))}.str("ShardIterator"))
				}
				for _, c := range Map(svc, op, in.Parameters, region, acct) {
					c.Function = function
					if stream != "" {
						c.Resource = stream
					}
					sink(ctx, c)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				if svc == streamsService && err == nil {
					iters.note(op, in.Parameters, out.Result, stream)
				}
				return out, md, err
			}), middleware.After)
	}
}

// streamsService is the SDK's service id of DynamoDB Streams.
const streamsService = "DynamoDB Streams"

// iterators remembers which stream each shard iterator reads: IAM
// authorizes GetRecords on the stream, which its input (an opaque
// iterator) does not name. GetShardIterator names the stream and returns an
// iterator; each GetRecords returns the next. An iterator is taken when it
// is used, so the map holds one per shard being read.
type iterators struct {
	mu     sync.Mutex
	stream map[string]string
}

// maxIterators bounds the iterators remembered (iterators never used are
// dropped past it).
const maxIterators = 1000

func (it *iterators) note(op string, input, result any, stream string) {
	out := members{reflect.Indirect(reflect.ValueOf(result))}
	var next string
	switch op {
	case "GetShardIterator":
		stream, next = members{reflect.Indirect(reflect.ValueOf(input))}.str("StreamArn"), out.str("ShardIterator")
	case "GetRecords":
		next = out.str("NextShardIterator")
	}
	if stream == "" || next == "" {
		return
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if len(it.stream) >= maxIterators {
		clear(it.stream)
	}
	it.stream[next] = stream
}

func (it *iterators) take(iterator string) string {
	it.mu.Lock()
	defer it.mu.Unlock()
	s := it.stream[iterator]
	delete(it.stream, iterator)
	return s
}

// Map turns one SDK call into the IAM requests AWS authorizes for it. It
// reads the input's members by their API names (TableName, KeyId, QueueUrl,
// ...) rather than by the SDK's types, so this package links no service
// client: a function links only the clients its role calls (see infra's
// TestFunctionsLinkWhatTheirRolesMayCall). TestMap pins every name on the
// SDK's own input types.
func Map(service, operation string, input any, region, account string) []Call {
	m := mapper{base: Call{Operation: service + "." + operation}, region: region, account: account}
	var byService func(string, members) ([]Call, bool)
	switch service { // the SDK's service ids
	case "DynamoDB":
		byService = m.dynamoDBCalls
	case "KMS":
		byService = m.kmsCalls
	case "SESv2":
		byService = m.sesCalls
	case "Pinpoint SMS Voice V2":
		byService = m.smsCalls
	case "SQS":
		byService = m.sqsCalls
	case "Secrets Manager":
		byService = m.secretsCalls
	case "S3":
		byService = m.s3Calls
	case streamsService:
		byService = m.streamsCalls
	}
	if byService != nil {
		if calls, ok := byService(operation, members{reflect.Indirect(reflect.ValueOf(input))}); ok {
			return calls
		}
	}
	return m.one("unmapped:"+service+":"+operation, "*", nil)
}

// mapper maps the calls of one operation in one region and account; each
// per-service method reports whether it knows the operation.
type mapper struct {
	base            Call
	region, account string
}

func (m mapper) one(action, resource string, ctx map[string]string) []Call {
	c := m.base
	c.Action, c.Resource, c.Context = action, resource, ctx
	return []Call{c}
}

func (m mapper) table(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return "arn:aws:dynamodb:" + m.region + ":" + m.account + ":table/" + name
}

// dynamoDBCalls: the action is the operation; the resource the table, or the
// index a Query or Scan names.
func (m mapper) dynamoDBCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "PutItem", "GetItem", "UpdateItem", "DeleteItem", "DescribeTable":
		return m.one("dynamodb:"+op, m.table(in.str("TableName")), nil), true
	case "Query", "Scan":
		return m.one("dynamodb:"+op, index(m.table(in.str("TableName")), in.str("IndexName")), nil), true
	case "BatchGetItem", "BatchWriteItem":
		return m.perTable("dynamodb:"+op, in.keys("RequestItems")), true
	case "TransactWriteItems":
		// Each item is authorized as its own single-item action.
		var out []Call
		for _, it := range in.list("TransactItems") {
			for _, kind := range []struct{ member, action string }{
				{"Put", "dynamodb:PutItem"}, {"Update", "dynamodb:UpdateItem"}, {"Delete", "dynamodb:DeleteItem"},
				{"ConditionCheck", "dynamodb:ConditionCheckItem"},
			} {
				if item := it.member(kind.member); item.set() {
					out = append(out, m.one(kind.action, m.table(item.str("TableName")), nil)...)
					break
				}
			}
		}
		return out, true
	}
	return nil, false
}

// streamsCalls: the DynamoDB Streams reads, authorized as dynamodb actions
// on the stream. GetRecords names no stream (its iterator is opaque): Map
// records it on "*", which no grant of a stream allows, and Middleware
// names the stream the iterator was issued for.
func (m mapper) streamsCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "DescribeStream", "GetShardIterator":
		return m.one("dynamodb:"+op, in.str("StreamArn"), nil), true
	case "GetRecords", "ListStreams":
		return m.one("dynamodb:"+op, "*", nil), true
	}
	return nil, false
}

// secretsCalls: the secret the SecretId names. The senders name it by ARN
// (WEBHOOK_SECRET_ARN); a bare name becomes an ARN without the random
// suffix Secrets Manager appends.
func (m mapper) secretsCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "GetSecretValue":
		id := in.str("SecretId")
		if !strings.HasPrefix(id, "arn:") {
			id = "arn:aws:secretsmanager:" + m.region + ":" + m.account + ":secret:" + id
		}
		return m.one("secretsmanager:"+op, id, nil), true
	}
	return nil, false
}

// perTable is one call of action on each of the named tables.
func (m mapper) perTable(action string, names []string) []Call {
	var out []Call
	for _, name := range names {
		out = append(out, m.one(action, m.table(name), nil)...)
	}
	return out
}

// kmsCalls: the key, with the encryption context as condition keys.
func (m mapper) kmsCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "Decrypt", "GenerateDataKey", "Encrypt":
		return m.one("kms:"+op, key(in.str("KeyId"), m.region, m.account), kmsContext(in.stringMap("EncryptionContext"), m.account)), true
	case "DescribeKey", "GenerateMac", "VerifyMac", "Sign", "GetPublicKey":
		// The HMAC keys and the digest key: no encryption context.
		return m.one("kms:"+op, key(in.str("KeyId"), m.region, m.account), kmsContext(nil, m.account)), true
	}
	return nil, false
}

// s3Calls: the digest bucket's calls. Object actions are authorized on
// arn:aws:s3:::<bucket>/<key>; HeadObject as s3:GetObject (of a version:
// s3:GetObjectVersion); ListObjectsV2 as s3:ListBucket and
// ListObjectVersions as s3:ListBucketVersions on the bucket. A PutObject that sets an Object Lock
// retention is also authorized as s3:PutObjectRetention, with the mode as
// s3:object-lock-mode.
func (m mapper) s3Calls(op string, in members) ([]Call, bool) {
	bucket := in.str("Bucket")
	object := "arn:aws:s3:::" + bucket + "/" + in.str("Key")
	switch op {
	case "PutObject":
		out := m.one("s3:PutObject", object, nil)
		if mode := in.str("ObjectLockMode"); mode != "" {
			out = append(out, m.one("s3:PutObjectRetention", object, map[string]string{"s3:object-lock-mode": mode})...)
		}
		return out, true
	case "GetObject", "HeadObject":
		if in.str("VersionId") != "" {
			return m.one("s3:GetObjectVersion", object, nil), true
		}
		return m.one("s3:GetObject", object, nil), true
	case "ListObjectsV2":
		return m.one("s3:ListBucket", "arn:aws:s3:::"+bucket, nil), true
	case "ListObjectVersions":
		return m.one("s3:ListBucketVersions", "arn:aws:s3:::"+bucket, nil), true
	}
	return nil, false
}

// sesCalls: SendEmail is authorized on the sending identity (the from address's
// domain) and the configuration set, each with the from address as
// ses:FromAddress; GetAccount has no resource ARN, so IAM authorizes it on
// "*".
func (m mapper) sesCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "SendEmail":
		from := in.str("FromEmailAddress")
		if a, err := mail.ParseAddress(from); err == nil {
			from = a.Address
		}
		_, domain, _ := strings.Cut(from, "@")
		ctx := map[string]string{"ses:FromAddress": from}
		out := m.one("ses:SendEmail", "arn:aws:ses:"+m.region+":"+m.account+":identity/"+domain, ctx)
		if cs := in.str("ConfigurationSetName"); cs != "" {
			out = append(out, m.one("ses:SendEmail", "arn:aws:ses:"+m.region+":"+m.account+":configuration-set/"+cs, ctx)...)
		}
		return out, true
	case "GetAccount":
		return m.one("ses:GetAccount", "*", nil), true
	}
	return nil, false
}

// smsCalls: End User Messaging SMS authorizes the origination identity when it
// is an ARN; otherwise AWS picks one of the account's, which an
// account-wide resource pattern covers. A send that names a configuration set
// or a protect configuration is authorized on each of them too (both are
// resources of sms-voice:SendTextMessage in the IAM data cfn-lint bundles).
func (m mapper) smsCalls(op string, in members) ([]Call, bool) {
	if op != "SendTextMessage" {
		return nil, false
	}
	res := in.str("OriginationIdentity")
	if !strings.HasPrefix(res, "arn:") {
		if res == "" {
			res = "default"
		}
		res = "arn:aws:sms-voice:" + m.region + ":" + m.account + ":" + res
	}
	out := m.one("sms-voice:SendTextMessage", res, nil)
	for _, named := range [...]struct{ member, kind string }{
		{"ConfigurationSetName", "configuration-set"}, {"ProtectConfigurationId", "protect-configuration"},
	} {
		if name, kind := in.str(named.member), named.kind; name != "" {
			if !strings.HasPrefix(name, "arn:") {
				name = "arn:aws:sms-voice:" + m.region + ":" + m.account + ":" + kind + "/" + name
			}
			out = append(out, m.one("sms-voice:SendTextMessage", name, nil)...)
		}
	}
	return out, true
}

// sqsCalls: the queue named by its URL.
func (m mapper) sqsCalls(op string, in members) ([]Call, bool) {
	switch op {
	case "SendMessage", "SendMessageBatch":
		return m.one("sqs:SendMessage", queue(in.str("QueueUrl"), m.region), nil), true
	case "ReceiveMessage", "DeleteMessage":
		return m.one("sqs:"+op, queue(in.str("QueueUrl"), m.region), nil), true
	}
	return nil, false
}

// members reads the members of an SDK input (a struct, or a pointer to one)
// by name. A member that is missing or nil reads as its zero value.
type members struct{ v reflect.Value }

func (m members) member(name string) members {
	if m.v.Kind() != reflect.Struct {
		return members{}
	}
	return members{reflect.Indirect(m.v.FieldByName(name))}
}

// set reports whether the member is present: a non-nil pointer.
func (m members) set() bool { return m.v.IsValid() }

// str reads a *string or string member.
func (m members) str(name string) string {
	if v := m.member(name).v; v.Kind() == reflect.String {
		return v.String()
	}
	return ""
}

// keys returns the sorted keys of a map member with string keys.
func (m members) keys(name string) []string {
	v := m.member(name).v
	if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.String {
		return nil
	}
	out := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// stringMap reads a map[string]string member.
func (m members) stringMap(name string) map[string]string {
	v := m.member(name).v
	if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
		return nil
	}
	out := make(map[string]string, v.Len())
	for _, k := range v.MapKeys() {
		out[k.String()] = v.MapIndex(k).String()
	}
	return out
}

// list reads a slice member, each element as members.
func (m members) list(name string) []members {
	v := m.member(name).v
	if v.Kind() != reflect.Slice {
		return nil
	}
	out := make([]members, v.Len())
	for i := range out {
		out[i] = members{reflect.Indirect(v.Index(i))}
	}
	return out
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
