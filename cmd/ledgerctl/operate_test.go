package main

import (
	"errors"
	"strings"
	"testing"
)

// TestOperatorEndpoint: resolve posts only to an https function URL, or over http to a loopback
// emulator; anything else is a usage error that names OPERATOR_URL, before any request.
func TestOperatorEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for a usage error
	}{
		{"https://abc123.lambda-url.us-east-1.on.aws/", "https://abc123.lambda-url.us-east-1.on.aws/"},
		{"https://abc123.lambda-url.us-east-1.on.aws", "https://abc123.lambda-url.us-east-1.on.aws/"},
		{"http://127.0.0.1:4566/_aws/lambda-url/abc123/", "http://127.0.0.1:4566/_aws/lambda-url/abc123/"},
		{"http://localhost:4566/_aws/lambda-url/abc123/", "http://localhost:4566/_aws/lambda-url/abc123/"},
		{"", ""},
		{"http://abc123.lambda-url.us-east-1.on.aws/", ""}, // plain http off the machine
		{"https://user:pass@abc123.lambda-url.us-east-1.on.aws/", ""},
		{"https://abc123.lambda-url.us-east-1.on.aws/?x=1", ""},
		{"abc123.lambda-url.us-east-1.on.aws", ""},
		{"ftp://abc123/", ""},
	} {
		a := &app{operatorURL: tc.in}
		got, err := a.operatorEndpoint()
		var usage *usageError
		switch {
		case tc.want == "" && (!errors.As(err, &usage) || !strings.Contains(err.Error(), operatorURLEnv)):
			t.Errorf("%q: %q, %v; want a usage error naming %s", tc.in, got, err, operatorURLEnv)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
