// Package webhooksecret builds the webhook transport of the senders
// (dispatch and reconcile) with its signing secret, read once from AWS
// Secrets Manager (WEBHOOK_SECRET_ARN) when the function starts. Only the
// senders' wiring packages import it, so only their binaries link the
// Secrets Manager client, and their roles alone may call GetSecretValue on
// the secret (infra/webhook.go).
package webhooksecret

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ErrSecret is wrapped by Load's errors. They name the secret's ARN and
// the failure, never its value.
var ErrSecret = errors.New("webhooksecret: cannot read the webhook signing secret")

// Client is the one Secrets Manager call the senders make.
type Client interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Load returns the current value (AWSCURRENT) of the secret arn: its
// SecretString's bytes, or its SecretBinary, used as they are. A value that
// begins or ends with white space is refused: it is almost always a
// newline a file put there, which the receiver would not sign with, so
// every request would be refused.
func Load(ctx context.Context, c Client, arn string) ([]byte, error) {
	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrSecret, arn, err)
	}
	var v []byte
	switch {
	case out.SecretString != nil && *out.SecretString != "":
		v = []byte(*out.SecretString)
	case len(out.SecretBinary) > 0:
		v = out.SecretBinary
	default:
		return nil, fmt.Errorf("%w %s: the secret has no value", ErrSecret, arn)
	}
	if len(bytes.TrimSpace(v)) != len(v) {
		return nil, fmt.Errorf("%w %s: the value begins or ends with white space (a trailing newline?)", ErrSecret, arn)
	}
	return v, nil
}

// Transports returns a builder of the webhook transport for env: the first
// call reads the secret (one GetSecretValue per process, however many
// channels use the webhook); later calls reuse it. The secret is kept only
// in the transport.
func Transports(ctx context.Context, env wire.Env) func() (ledger.Transport, error) {
	var secret []byte
	return func() (ledger.Transport, error) {
		if secret == nil {
			s, err := Load(ctx, secretsmanager.NewFromConfig(env.Config), env.Settings.WebhookSecretARN)
			if err != nil {
				return nil, err
			}
			secret = s
		}
		return wire.Webhook(env.Settings, secret)
	}
}
