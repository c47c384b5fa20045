package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// explainAWS turns the AWS errors an operator can act on into a sentence
// saying what to fix: a missing table, a missing permission, bad
// credentials. Other errors are returned unchanged.
func (a *app) explainAWS(err error) error {
	region := ""
	if a.cfg != nil {
		region = a.cfg.Region
	}
	var op *smithy.OperationError
	action := "the AWS API"
	if errors.As(err, &op) {
		action = iamPrefix(op.Service()) + ":" + op.Operation()
	}

	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		table, flagName := a.table, "--table / "+settings.LedgerTable.Env
		if op != nil && op.Operation() == "DeleteItem" {
			// The ledger store never deletes; only the content purge does.
			table, flagName = a.contentTable, "--content-table / "+settings.ContentTable.Env
		}
		return fmt.Errorf("table %s not found in region %s (check %s and AWS_REGION)", table, region, flagName)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); code {
		case "AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "KMSAccessDeniedException":
			target := ""
			if strings.HasPrefix(action, "dynamodb:") {
				target = " on table " + a.table
			}
			return fmt.Errorf("access denied: the caller may not perform %s%s in region %s; grant it in the caller's IAM policy (%s)", action, target, region, code)
		case "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "InvalidSignatureException", "SignatureDoesNotMatch":
			return fmt.Errorf("AWS rejected the credentials calling %s (%s): refresh them or check AWS_PROFILE", action, code)
		}
	}
	if strings.Contains(err.Error(), "failed to retrieve credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found") {
		return fmt.Errorf("no AWS credentials found calling %s: configure a profile (AWS_PROFILE) or environment credentials", action)
	}
	return err
}

// iamPrefix maps an SDK service id to its IAM action prefix.
func iamPrefix(serviceID string) string {
	switch serviceID {
	case "DynamoDB":
		return "dynamodb"
	case "STS":
		return "sts"
	case "SQS":
		return "sqs"
	case "KMS":
		return "kms"
	}
	return strings.ToLower(strings.ReplaceAll(serviceID, " ", ""))
}
