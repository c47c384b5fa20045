package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/pkg/envelope"
)

// TestIntentQueue: the intent queue keeps intents an hour, hides a received one for six claim
// timeouts and dead-letters it after five receives; its DLQ keeps them 14 days.
func TestIntentQueue(t *testing.T) {
	s := synth(t, nil)
	dlq := s.logicalID(t, "AWS::SQS::Queue", "IntentDlq")
	hasWorkQueue(t, s, "intent queue", 3600, 180, dlq, 5, nil) // 180: 6 x claim's 30 s
	retainsTwoWeeks(t, s, dlq)
}

func TestClaimEventSource(t *testing.T) {
	s := synth(t, nil)
	hasQueueMapping(t, s, "claim SQS mapping",
		s.logicalID(t, "AWS::Lambda::Function", "ClaimFunction"), s.logicalID(t, "AWS::SQS::Queue", "IntentQueue"), 10)
}

// TestProducers: with producerArns, only the producers may send intents (sqs:SendMessage, nothing
// more) and seal content (GenerateDataKey under the envelope's purpose), and every other principal
// is denied both; without (the local stage only), nothing is denied and the synth warns what that
// leaves open.
func TestProducers(t *testing.T) {
	const producer = "arn:aws:iam::111122223333:role/account-service"
	s := synth(t, func(p *LedgerStackProps) { p.ProducerPrincipalArns = []string{producer} })
	exempt := `{"ArnNotEquals":{"aws:PrincipalArn":["` + producer + `"]}}`

	queue := queuePolicy(t, s, "IntentQueue")
	allow := policyStatement(t, queue, "ProducersSendIntents")
	if allow["Effect"] != "Allow" || mustJSON(allow["Principal"]) != `{"AWS":"`+producer+`"}` || allow["Action"] != "sqs:SendMessage" {
		t.Errorf("ProducersSendIntents = %s, want the producer allowed sqs:SendMessage only", mustJSON(allow))
	}
	deny := policyStatement(t, queue, "OnlyProducersSendIntents")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sqs:SendMessage" ||
		mustJSON(deny["Condition"]) != exempt {
		t.Errorf("OnlyProducersSendIntents = %s, want a Deny of sqs:SendMessage to all but the producer", mustJSON(deny))
	}

	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "ContentKey")])["KeyPolicy"].(map[string]any)
	seal := policyStatement(t, key, "ProducersSeal")
	if seal["Effect"] != "Allow" || mustJSON(seal["Principal"]) != `{"AWS":"`+producer+`"}` || seal["Action"] != "kms:GenerateDataKey" ||
		mustJSON(seal["Condition"]) != `{"StringEquals":{"kms:EncryptionContext:purpose":"`+envelope.Purpose+`"}}` {
		t.Errorf("ProducersSeal = %s, want GenerateDataKey for the producer under purpose %s", mustJSON(seal), envelope.Purpose)
	}
	deny = policyStatement(t, key, "OnlyProducersSeal")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` ||
		mustJSON(deny["Action"]) != `["kms:Encrypt","kms:GenerateDataKey*"]` || mustJSON(deny["Condition"]) != exempt {
		t.Errorf("OnlyProducersSeal = %s, want a Deny of kms:GenerateDataKey* and kms:Encrypt to all but the producer", mustJSON(deny))
	}
	if w := producerWarnings(s); len(w) != 0 {
		t.Errorf("producerArns set, yet the synth warns: %v", w)
	}

	open := synth(t, func(p *LedgerStackProps) { p.ProducerPrincipalArns, p.LocalStage = nil, true })
	for _, sid := range []string{"ProducersSendIntents", "OnlyProducersSendIntents"} {
		if strings.Contains(mustJSON(queuePolicy(t, open, "IntentQueue")), sid) {
			t.Errorf("no producerArns, yet the intent queue policy has %s", sid)
		}
	}
	if w := producerWarnings(open); len(w) != 1 || !strings.Contains(w[0], "any principal in this account") ||
		!strings.Contains(w[0], "verified sender") {
		t.Errorf("no producerArns: warnings %q, want one saying who may publish intents", w)
	}
}

// producerWarnings are the synth's warnings about producerArns.
func producerWarnings(s *synthesized) []string {
	var out []string
	for _, m := range *assertions.Annotations_FromStack(s.stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("producerArns"))) {
		out = append(out, fmt.Sprint(m.Entry.Data))
	}
	return out
}

// TestProducerArnsRequired: a stage without producerArns does not synthesize, and the error names
// producerArns, unless it is the local stage (localStage), which still synthesizes; the same
// holds for a stage read from context, as `cdk synth` and `make deploy` read it.
func TestProducerArnsRequired(t *testing.T) {
	for _, stage := range []string{"dev", "prod"} {
		p := testProps(t)
		p.ProducerPrincipalArns = nil
		p.Prefix = "resetledger-" + stage
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), "producerArns is not set") {
			t.Errorf("stage %s without producerArns: Validate = %v, want an error naming producerArns", stage, err)
		}
		ctx := map[string]any{"stage": stage}
		cfg, err := configFromContext(func(k string) any { return ctx[k] })
		if err != nil {
			t.Fatal(err)
		}
		cfg.Props.AssetDir, cfg.Props.Functions.SESFrom, cfg.Props.AlarmTopicArn = p.AssetDir, "no-reply@mail.example.com", testTopic
		if err := cfg.Props.Validate(); err == nil || !strings.Contains(err.Error(), "producerArns") {
			t.Errorf("stage %s from context without producerArns: Validate = %v, want an error naming producerArns", stage, err)
		}
	}
	local := synth(t, func(p *LedgerStackProps) { p.ProducerPrincipalArns, p.LocalStage = nil, true })
	if w := producerWarnings(local); len(w) != 1 {
		t.Errorf("local stage without producerArns: warnings %q, want the one saying who may publish intents", w)
	}
	if got := localContext(t)["localStage"]; got != "true" {
		t.Errorf("deploy-local.sh sets localStage=%q, want true (its stage has no producerArns)", got)
	}
}
