package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestLeastPrivilege pins every permission each role gets: a new or widened grant fails here.
// TestLeastPrivilege is long because it lists every role's grants, one table.
func TestLeastPrivilege(t *testing.T) {
	tableKey := []string{"kms:Decrypt on LedgerKey", "kms:DescribeKey on LedgerKey", "kms:Encrypt on LedgerKey", "kms:GenerateDataKey on LedgerKey"}
	logs := func(fn string) []string {
		return []string{"logs:CreateLogStream on " + fn + "Logs", "logs:PutLogEvents on " + fn + "Logs"}
	}
	send := []string{
		"kms:Decrypt on ContentKey",
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:identity/mail.example.com",
		// A send naming a configuration set is authorized on the set too: the stack's own set.
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:configuration-set/resetledger-test-events",
		// No origination identity configured: the account's sms-voice resources, the set among them.
		"sms-voice:SendTextMessage on arn:AWS::Partition:sms-voice:AWS::Region:AWS::AccountId:*",
		"ses:GetAccount on *", // no sendRateEmail: the email budget is the SES account's MaxSendRate
	}
	want := map[string][]string{
		"Claim": join(tableKey, logs("Claim"),
			[]string{"dynamodb:GetItem on LedgerTable", "dynamodb:PutItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:PutItem on ContentTable", "dynamodb:DeleteItem on ContentTable",
				"dynamodb:UpdateItem on LimitsTable", // each subject's newest challenge
				"sqs:DeleteMessage on IntentQueue", "sqs:GetQueueAttributes on IntentQueue", "sqs:ReceiveMessage on IntentQueue",
				"kms:VerifyMac on IntentKey"}), // what the producer bound is what the claim decides on
		"Dispatch": join(tableKey, logs("Dispatch"), send,
			[]string{"dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:GetItem on ContentTable", "dynamodb:DeleteItem on ContentTable", "dynamodb:BatchGetItem on ContentTable",
				"dynamodb:DescribeStream on LedgerTable.StreamArn", "dynamodb:GetRecords on LedgerTable.StreamArn",
				"dynamodb:GetShardIterator on LedgerTable.StreamArn", "dynamodb:ListStreams on *",
				"sqs:SendMessage on StreamFailureDlq",
				"dynamodb:GetItem on BudgetTable", "dynamodb:UpdateItem on BudgetTable",
				"dynamodb:GetItem on LimitsTable", "dynamodb:UpdateItem on LimitsTable", "dynamodb:PutItem on LimitsTable", "dynamodb:DeleteItem on LimitsTable", // send limits
				"dynamodb:BatchGetItem on LimitsTable", // with the row and content: ledger.FirstReads
				// a refused admission's look at the subject's older challenges (Store.ListByRef)
				"dynamodb:Query on LedgerTable/index/subject", "dynamodb:BatchGetItem on LedgerTable",
				"sqs:DeleteMessage on DispatchQueue", "sqs:GetQueueAttributes on DispatchQueue", "sqs:ReceiveMessage on DispatchQueue",
				"sqs:SendMessage on DispatchQueue",
				"kms:GenerateMac on AttemptProofKey",  // every SES or SMS send carries its attempt's proof
				"kms:GenerateMac on FingerprintKey"}), // the destination limit's counter keys
		// No content read: without a webhook transport reconcile never opens content
		// (TestReconcileContentOnlyWithWebhook); it purges the content of the rows it ends.
		"Reconcile": join(tableKey, logs("Reconcile"),
			[]string{"dynamodb:BatchGetItem on LedgerTable",
				"dynamodb:Query on LedgerTable/index/open", "dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:DeleteItem on ContentTable", "sqs:SendMessage on DispatchQueue",
				"dynamodb:GetItem on BudgetTable", "dynamodb:UpdateItem on BudgetTable"}), // the dispatch marks
		// The provider events queue's poller; rows read and updated; content purged.
		"Events": join(tableKey, logs("Events"),
			[]string{"sqs:DeleteMessage on ProviderEventsQueue", "sqs:GetQueueAttributes on ProviderEventsQueue",
				"sqs:ReceiveMessage on ProviderEventsQueue", "dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:DeleteItem on ContentTable", "kms:VerifyMac on AttemptProofKey",
				"kms:Decrypt on ProviderEventsQueueKey"}), // SQS decrypts what the poller receives, as the events role
		"Expire": join(tableKey, logs("Expire"),
			[]string{"dynamodb:Query on LedgerTable/index/open", "dynamodb:BatchGetItem on LedgerTable",
				"dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable", "dynamodb:DeleteItem on ContentTable"}),
		// ledgerctl's reads, and resolve through the operator function (operator.go).
		"LedgerOperator": slices.Clone(operatorGrants),
		// The operator function: resolve's read and conditional update, and the content purge.
		"Operate": join(tableKey, logs("Operate"),
			[]string{"dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable", "dynamodb:DeleteItem on ContentTable"}),
		// The digest function (digest.go): its stream (read through DynamoDB's use of the ledger key),
		// the on-failure queue, kms:Sign on the digest key, and pkg/s3digest's writer's calls.
		"Digest": join(logs("Digest"),
			[]string{"kms:Decrypt on LedgerKey", "kms:DescribeKey on LedgerKey",
				"dynamodb:DescribeStream on LedgerTable.StreamArn", "dynamodb:GetRecords on LedgerTable.StreamArn",
				"dynamodb:GetShardIterator on LedgerTable.StreamArn", "dynamodb:ListStreams on *",
				"sqs:SendMessage on DigestFailureDlq", "kms:Sign on DigestKey",
				"s3:PutObject on DigestBucket/digests/*", "s3:PutObjectRetention on DigestBucket/digests/*",
				"s3:GetObject on DigestBucket/digests/*", "s3:ListBucket on DigestBucket"}),
		// EventBridge publishing key and ledger policy changes to the alarm topic (audit.go).
		"SecurityEvents": {"sns:Publish on " + testTopic},
	}
	got := synth(t, nil).grants(t)
	for role, w := range want {
		sort.Strings(w)
		if !slices.Equal(got[role], w) {
			t.Errorf("%s grants:\n got  %q\n want %q", role, got[role], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("roles with policies = %d, want %d", len(got), len(want))
	}
}

func TestSendPermissionConditions(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.Functions.SESConfigurationSet = "reset"
		p.Functions.SMSConfigurationSet = "reset-sms"
		p.Functions.SMSOrigination = "arn:aws:sms-voice:us-east-1:111122223333:pool/pool-abc"
	})
	check(t, "ses scoped to the from address", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action":    "ses:SendEmail",
				"Condition": map[string]any{"StringEquals": map[string]any{"ses:FromAddress": "no-reply@mail.example.com"}},
			})})},
		})
	})
	grants := s.grants(t)
	for _, want := range []string{
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:identity/mail.example.com",
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:configuration-set/reset",
	} {
		if !slices.Contains(grants["Dispatch"], want) {
			t.Errorf("Dispatch lacks %s: %q", want, grants["Dispatch"])
		}
	}
	// Reconcile retries only through transports that honor an idempotency key
	// (the webhook): it must not be able to send through SES or SMS.
	for _, g := range grants["Reconcile"] {
		if strings.HasPrefix(g, "ses:") || strings.HasPrefix(g, "sms-voice:") {
			t.Errorf("Reconcile may send: %s", g)
		}
	}
	check(t, "sms scoped to the origination identity", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action":   "sms-voice:SendTextMessage",
				"Resource": assertions.Match_ArrayWith(&[]any{"arn:aws:sms-voice:us-east-1:111122223333:pool/pool-abc"}),
			})})},
		})
	})
	check(t, "table key use only through DynamoDB", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action":    assertions.Match_ArrayWith(&[]any{"kms:Encrypt"}),
				"Condition": map[string]any{"StringEquals": map[string]any{"kms:ViaService": assertions.Match_AnyValue()}},
			})})},
		})
	})
	noNagErrors(t, s)
}

// TestSendRates: a configured rate reaches dispatch's environment; ses:GetAccount is granted only
// when dispatch must read the email rate from the SES account (SES email, no sendRateEmail).
func TestSendRates(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mutate         func(*LedgerStackProps)
		email, sms     any // nil: the variable is absent
		readsSESRate   bool
		nagSuppression bool
	}{
		{"defaults", nil, nil, "1", true, true}, // SMS through End User Messaging: the default rate (spend.go)
		{"both configured", func(p *LedgerStackProps) {
			p.Functions.SendRates[ledger.Email], p.Functions.SendRates[ledger.SMS] = 12.5, 1
		}, "12.5", "1", false, false},
		{"webhook email", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.Email], p.Functions.WebhookURL, p.Functions.SESFrom = settings.TransportWebhook, "https://gw.example.com/send", ""
		}, nil, "1", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			vars := s.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars["SEND_RATE_EMAIL"] != tc.email || vars["SEND_RATE_SMS"] != tc.sms {
				t.Errorf("SEND_RATE_EMAIL, SEND_RATE_SMS = %v, %v; want %v, %v", vars["SEND_RATE_EMAIL"], vars["SEND_RATE_SMS"], tc.email, tc.sms)
			}
			for _, name := range []settings.Role{settings.Claim, settings.Reconcile, settings.Expire} {
				for k := range s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any) {
					// Reconcile reads BUDGET_TABLE for the dispatch marks, never the budget's rates or waits.
					if strings.HasPrefix(k, "SEND_RATE_") || k == "BUDGET_MAX_WAIT" || strings.HasPrefix(k, "RETRY_BACKOFF_") ||
						k == "BUDGET_TABLE" && name != settings.Reconcile {
						t.Errorf("%s gets dispatch's %s", name, k)
					}
				}
			}
			grants := s.grants(t)
			if got := slices.Contains(grants["Dispatch"], "ses:GetAccount on *"); got != tc.readsSESRate {
				t.Errorf("dispatch ses:GetAccount = %v, want %v", got, tc.readsSESRate)
			}
			for role, g := range grants {
				if role != "Dispatch" && slices.ContainsFunc(g, func(g string) bool { return strings.HasPrefix(g, "ses:GetAccount") }) {
					t.Errorf("%s may call ses:GetAccount", role)
				}
			}
			role := s.resources("AWS::IAM::Role")[s.logicalID(t, "AWS::IAM::Role", "DispatchRole")]
			if got := strings.Contains(mustJSON(role["Metadata"]), "ses:GetAccount"); got != tc.nagSuppression {
				t.Errorf("dispatch role's IAM5 reason names ses:GetAccount: %v, want %v", got, tc.nagSuppression)
			}
			noNagErrors(t, s)
		})
	}
}

func TestContentKeyDecryptIsExclusive(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.ProducerPrincipalArns = []string{"arn:aws:iam::111122223333:role/account-service"}
	})
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "ContentKey")])
	var producer []string
	for _, st := range list(key["KeyPolicy"].(map[string]any)["Statement"]) {
		stmt := st.(map[string]any)
		if fmt.Sprint(stmt["Principal"]) == "map[AWS:arn:aws:iam::111122223333:role/account-service]" {
			for _, a := range list(stmt["Action"]) {
				producer = append(producer, a.(string))
			}
		}
	}
	// Decrypt, and the two ways around it: re-encrypting a data key under another key, and granting
	// oneself Decrypt.
	deny := policyStatement(t, key["KeyPolicy"].(map[string]any), "OnlySendersDecrypt")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` ||
		mustJSON(deny["Action"]) != `["kms:CreateGrant","kms:Decrypt","kms:ReEncrypt*"]` {
		t.Fatalf("OnlySendersDecrypt = %s, want a Deny of kms:Decrypt, kms:ReEncrypt* and kms:CreateGrant to all", mustJSON(deny))
	}
	var exempt []string
	for _, r := range list(deny["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"]) {
		exempt = append(exempt, label(r))
	}
	sort.Strings(exempt)
	// With SES and End User Messaging SMS reconcile never opens content (settings.OpensContent).
	if !slices.Equal(exempt, []string{"DispatchRole"}) {
		t.Errorf("decrypt exempt = %v, want the dispatch role only (no webhook transport)", exempt)
	}
	sort.Strings(producer)
	if !slices.Equal(producer, []string{"kms:GenerateDataKey"}) {
		t.Errorf("producer key actions = %v, want GenerateDataKey only", producer)
	}
	check(t, "producer may send intents, and only that", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Effect": "Allow", "Principal": map[string]any{"AWS": "arn:aws:iam::111122223333:role/account-service"},
				"Action": "sqs:SendMessage",
			})})},
		})
	})
}

// TestReconcileContentOnlyWithWebhook: reconcile opens content only for a same-key retry, which
// only the webhook transport allows. With SES and End User Messaging SMS its role holds neither
// kms:Decrypt on the content key nor GetItem on the content table (it keeps DeleteItem, to purge
// the content of the rows it ends), the key's Deny exempts dispatch only, and its environment has
// no CONTENT_KEY_ARN. With a webhook on either channel it holds both, the Deny exempts it, and
// it is given the key.
func TestReconcileContentOnlyWithWebhook(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*LedgerStackProps)
		content bool
	}{
		{"ses and sms", nil, false},
		{"sms through the webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.test/send"
		}, true},
		{"email through the webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.Email], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.test/send"
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			grants := s.grants(t)["Reconcile"]
			has := func(g string) bool { return slices.Contains(grants, g) }
			if has("kms:Decrypt on ContentKey") != tc.content || has("dynamodb:GetItem on ContentTable") != tc.content {
				t.Errorf("reconcile grants %v: want kms:Decrypt ContentKey and dynamodb:GetItem ContentTable: %v", grants, tc.content)
			}
			if !has("dynamodb:DeleteItem on ContentTable") {
				t.Errorf("reconcile grants %v: want dynamodb:DeleteItem ContentTable (it purges the rows it ends)", grants)
			}
			key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "ContentKey")])
			deny := policyStatement(t, key["KeyPolicy"].(map[string]any), "OnlySendersDecrypt")
			var exempt []string
			for _, r := range list(deny["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"]) {
				exempt = append(exempt, label(r))
			}
			if slices.Contains(exempt, "ReconcileRole") != tc.content {
				t.Errorf("OnlySendersDecrypt exempts %v: reconcile exempt want %v", exempt, tc.content)
			}
			env := s.function(t, settings.Reconcile)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if _, given := env[settings.ContentKeyARN.Env]; given != tc.content {
				t.Errorf("reconcile environment has %s: %v, want %v", settings.ContentKeyARN.Env, given, tc.content)
			}
		})
	}
}
