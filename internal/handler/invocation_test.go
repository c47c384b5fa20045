package handler

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

func TestInvocationCarriesTheRequestID(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-42"})
	w, log := invocation(ctx, "dispatch", base)
	log.Info("x")
	if w != "dispatch/req-42" || !strings.Contains(buf.String(), `"request_id":"req-42"`) {
		t.Fatalf("worker %q, log %s", w, buf.String())
	}
	if w, _ := invocation(context.Background(), "claim", base); w != "claim" {
		t.Fatalf("outside Lambda: %q", w)
	}
}
