package sdkhttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/resetledger/resetledger/internal/sdkhttp"
)

// closingBody answers io.EOF once closed, as the SDK's request body does.
type closingBody struct {
	r      *strings.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}
func (b *closingBody) Close() error { b.closed = true; return nil }

type doer func(*http.Request) (*http.Response, error)

func (d doer) Do(r *http.Request) (*http.Response, error) { return d(r) }

// TestOwnBodySurvivesTheCallerClosingItsBody: what net/http reads after the
// caller closed its body is still the whole body.
func TestOwnBodySurvivesTheCallerClosingItsBody(t *testing.T) {
	orig := &closingBody{r: strings.NewReader(`{"TableName":"t"}`)}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", orig)
	c := sdkhttp.Wrap(doer(func(r *http.Request) (*http.Response, error) {
		orig.Close() // the SDK closes its body as the response headers arrive
		got, err := io.ReadAll(r.Body)
		if err != nil || string(got) != `{"TableName":"t"}` {
			t.Fatalf("body seen by net/http: %q, %v", got, err)
		}
		again, _ := r.GetBody()
		if b, _ := io.ReadAll(again); string(b) != `{"TableName":"t"}` {
			t.Fatalf("GetBody: %q", b)
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	if _, ok := sdkhttp.Wrap(c).(sdkhttp.OwnBody).Next.(sdkhttp.OwnBody); ok {
		t.Fatal("wrapping twice copies the body twice")
	}
}

// LoadDefaultConfig hands back a configuration whose client copies bodies,
// and keeps what the options asked for.
func TestLoadDefaultConfigWraps(t *testing.T) {
	cfg, err := sdkhttp.LoadDefaultConfig(context.Background(), config.WithRegion("eu-west-1"),
		config.WithSharedConfigFiles([]string{}), config.WithSharedCredentialsFiles([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.HTTPClient.(sdkhttp.OwnBody); !ok || cfg.Region != "eu-west-1" {
		t.Fatalf("client %T, region %q", cfg.HTTPClient, cfg.Region)
	}
}
