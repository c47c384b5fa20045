package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableClient lists the calls CreateTables makes.
type TableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// LedgerTable returns the ledger table definition: key pk, stream with new
// and old images, the sparse open-row index and the two timeline indexes
// (SubjectIndex, DestinationIndex). It mirrors the CDK stack and is used by
// tests and tooling that create tables directly.
func LedgerTable(name string) *dynamodb.CreateTableInput {
	str := types.ScalarAttributeTypeS
	return &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: str},
			{AttributeName: aws.String(AttrOpenPK), AttributeType: str},
			{AttributeName: aws.String(AttrOpenDue), AttributeType: str},
			{AttributeName: aws.String(AttrSubjectRef), AttributeType: str},
			{AttributeName: aws.String(AttrDestinationRef), AttributeType: str},
			{AttributeName: aws.String(AttrCreatedAt), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(IndexName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrOpenPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrOpenDue), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, timelineIndexDef(SubjectIndex, AttrSubjectRef), timelineIndexDef(DestinationIndex, AttrDestinationRef)},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	}
}

// timelineIndexDef is a KEYS_ONLY index keyed on ref and created_at.
func timelineIndexDef(index, ref string) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(index),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(ref), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrCreatedAt), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}
}

// ContentTable returns the sealed-content table definition: key pk, no stream.
func ContentTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}},
	}
}

// CreateTables creates both tables and turns on TTL on the ttl attribute.
// A table that already exists is left as it is (a retried create whose first
// attempt landed reports exactly that).
func CreateTables(ctx context.Context, c TableClient, ledgerTable, contentTable string) error {
	for _, in := range []*dynamodb.CreateTableInput{LedgerTable(ledgerTable), ContentTable(contentTable)} {
		var inUse *types.ResourceInUseException
		if _, err := c.CreateTable(ctx, in); err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", *in.TableName, err)
		}
		if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               in.TableName,
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("enable ttl on %s: %w", *in.TableName, err)
		}
	}
	return nil
}
