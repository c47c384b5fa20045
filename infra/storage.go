package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/dynamostore"
)

// storage is the stack's keys and tables. The tables' keys, TTL attribute and index are the
// store's own names (internal/dynamostore), which also defines the tables for tests and tooling.
type storage struct {
	// ledgerKey encrypts every table at rest; contentKey seals the secret-bearing envelope, which
	// the producer encrypts and only dispatch and reconcile may decrypt.
	ledgerKey, contentKey awskms.Key
	// fingerprintKey MACs destinations into the limits table's keys; intentKey binds an intent's
	// fields (macs.go).
	fingerprintKey, intentKey awskms.Key
	// ledger holds the rows and streams their changes to dispatch; content holds sealed content
	// for minutes; budget holds the send-rate budget; limits holds the send-limit counters and each
	// subject's newest challenge.
	ledger, content, budget, limits awsdynamodb.Table
}

// ledgerIndexArn is the ARN of the ledger table's index name, what a grant to Query it names.
func (st storage) ledgerIndexArn(name string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{st.ledger.TableArn(), jsii.String("/index/" + name)})
}

// storage defines the keys and the three tables.
func (p *LedgerStackProps) storage(stack awscdk.Stack) storage {
	key := func(id, desc, alias string) awskms.Key {
		props := &awskms.KeyProps{
			Description:       jsii.String(p.Prefix + " " + desc),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     p.removalPolicy(),
			// The longest window KMS allows (audit.go): a key scheduled for deletion by accident
			// can be cancelled for 30 days. Deleting the ledger key makes the table, its
			// point-in-time backups and the backups that inherit its encryption unreadable; deleting
			// the content key stops every send until producers seal under a new one.
			PendingWindow: awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
		}
		if alias != "" {
			props.Alias = jsii.String(alias)
		}
		return awskms.NewKey(stack, jsii.String(id), props)
	}
	s := storage{
		ledgerKey: key("LedgerKey", "ledger, content and budget tables at rest", ""),
		contentKey: key(awscall.ContentKey, "sealed reset-notification content (producer encrypts, dispatch decrypts)",
			"alias/"+p.Prefix+"-content"),
	}
	s.fingerprintKey, s.intentKey = p.macKeys(stack)
	s.ledger = p.ledgerTable(stack, s.ledgerKey)
	s.content = p.contentTable(stack, s.ledgerKey)
	s.budget = p.budgetTable(stack, s.ledgerKey)
	s.limits = derivedTable(stack, awscall.LimitsTable, s.ledgerKey, jsii.String(dynamostore.AttrTTL),
		"The limits table holds send-limit counters that expire an hour after their window and each subject's "+
			"newest challenge; a restore would bring back stale counts. Every limit decision is evidence in the "+
			"ledger table, which has PITR.")
	return s
}

// ledgerTable is the evidence: protected and backed up unless the stage says otherwise, streamed
// to dispatch with both images, with the sparse index of open rows the sweeps query and the two
// timeline indexes ledgerctl timeline queries.
func (p *LedgerStackProps) ledgerTable(stack awscdk.Stack, key awskms.Key) awsdynamodb.Table {
	ledger := awsdynamodb.NewTable(stack, jsii.String(awscall.LedgerTable), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:              awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		TimeToLiveAttribute: jsii.String(dynamostore.AttrTTL),
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       key,
		DeletionProtection:  jsii.Bool(p.DeletionProtection),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(p.PointInTimeRecovery),
		},
		RemovalPolicy: p.removalPolicy(),
	})
	ledger.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(dynamostore.IndexName),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrOpenPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrOpenDue), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	// The reviewers' timelines (ledgerctl timeline): one subject's or one destination's rows by
	// creation time. KEYS_ONLY, and their keys never change after the claim, so only a row's
	// creation writes them; subject_ref is sparse (only intents that carry it). A table takes one
	// new index per update: an existing stack gets the destination index first (SkipSubjectIndex).
	for _, ix := range []struct{ name, ref string }{
		{dynamostore.SubjectIndex, dynamostore.AttrSubjectRef},
		{dynamostore.DestinationIndex, dynamostore.AttrDestinationRef},
	} {
		if ix.name == dynamostore.SubjectIndex && p.SkipSubjectIndex {
			continue
		}
		ledger.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.name),
			PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(ix.ref), Type: awsdynamodb.AttributeType_STRING},
			SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrCreatedAt), Type: awsdynamodb.AttributeType_STRING},
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		})
	}
	if !p.PointInTimeRecovery {
		cdknag.NagSuppressions_AddResourceSuppressions(ledger, &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String("AwsSolutions-DDB3"),
			Reason: jsii.String("PITR is turned off deliberately for stage " + p.Prefix + " (a throw-away or emulator stage)."),
		}}, jsii.Bool(true))
	}
	return ledger
}

// contentTable holds sealed content for minutes, expiring by TTL at the challenge's expiry.
func (p *LedgerStackProps) contentTable(stack awscdk.Stack, key awskms.Key) awsdynamodb.Table {
	return derivedTable(stack, awscall.ContentTable, key, jsii.String(dynamostore.AttrTTL),
		"The content table holds sealed secret-bearing messages for minutes (TTL at challenge "+
			"expiry, purged at every terminal state); point-in-time backups would keep reset secrets for 35 days, "+
			"which the design forbids.")
}

// budgetTable is the send-rate budget: one item per channel holding its GCRA theoretical arrival
// time, rewritten on every send.
func (p *LedgerStackProps) budgetTable(stack awscdk.Stack, key awskms.Key) awsdynamodb.Table {
	return derivedTable(stack, awscall.BudgetTable, key, nil,
		"The budget table holds one send-rate timestamp per channel, rewritten on every send; "+
			"a restore would bring back a stale timestamp, and losing it only empties the budget (the provider's "+
			"own limit still answers not-sent, which dispatch retries). It holds no evidence; the ledger table has PITR.")
}

// derivedTable is a table that holds no evidence (the ledger does): sealed content that lives
// minutes and holds reset secrets, or the budget, whose loss only empties it (the provider's own
// limit still answers not-sent, which dispatch retries). It goes with the stack, and with a
// replacement: no deletion protection, which would make that delete fail (retaining the content
// table instead would keep secrets in an orphaned table), and no point-in-time backups, for the
// reason why gives cdk-nag.
func derivedTable(stack awscdk.Stack, id string, key awskms.Key, ttl *string, why string) awsdynamodb.Table {
	table := awsdynamodb.NewTable(stack, jsii.String(id), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: ttl,
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       key,
		DeletionProtection:  jsii.Bool(false),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(table, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-DDB3"), Reason: jsii.String(why),
	}}, jsii.Bool(true))
	return table
}
