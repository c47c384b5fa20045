package webhooksecret

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
)

// TestLoad reads a secret's value from Secrets Manager on the emulator as it is, and refuses a
// missing secret and a value edged with white space, never repeating the value.
func TestLoad(t *testing.T) {
	client := secretsmanager.NewFromConfig(emulator.Config(t))
	ctx := context.Background()
	arn, value := emulator.Secret(t, client, "webhook-secret")
	got, err := Load(ctx, client, arn)
	if err != nil || string(got) != value {
		t.Fatalf("Load = %d bytes, %v; want the value", len(got), err)
	}
	newline := emulator.UniqueName(t, "webhook-secret-nl")
	out, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(newline), SecretString: aws.String(value + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: out.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	for name, id := range map[string]string{"trailing newline": *out.ARN, "missing": arn + "-gone"} {
		_, err := Load(ctx, client, id)
		if !errors.Is(err, ErrSecret) {
			t.Errorf("%s: Load = %v, want ErrSecret", name, err)
		} else if strings.Contains(err.Error(), value) {
			t.Errorf("%s: the error repeats the value: %v", name, err)
		}
	}
}
