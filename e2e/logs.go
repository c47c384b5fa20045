package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// LogEvent is one CloudWatch Logs event.
type LogEvent struct {
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	LogStreamName string `json:"logStreamName"`
}

// FilterLogEvents returns the events of group since start that match pattern
// (CloudWatch Logs filter syntax, e.g. a quoted term), following every page.
//
// It is one signed JSON call (Logs_20140328.FilterLogEvents) to endpoint,
// made by hand because the module does not otherwise need the CloudWatch
// Logs client; the emulator answers it like CloudWatch Logs does.
func FilterLogEvents(ctx context.Context, cfg aws.Config, endpoint, group, pattern string, start time.Time) ([]LogEvent, error) {
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs: credentials: %w", err)
	}
	var events []LogEvent
	next := ""
	for page := 0; page < 100; page++ {
		in := map[string]any{"logGroupName": group, "filterPattern": pattern, "startTime": start.UnixMilli()}
		if next != "" {
			in["nextToken"] = next
		}
		body, _ := json.Marshal(in)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "Logs_20140328.FilterLogEvents")
		raw, err := signedDo(ctx, creds, cfg.Region, "logs", req, body)
		if err != nil {
			return nil, fmt.Errorf("logs: FilterLogEvents %s: %w", group, err)
		}
		var out struct {
			Events    []LogEvent `json:"events"`
			NextToken string     `json:"nextToken"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("logs: FilterLogEvents: %w", err)
		}
		events = append(events, out.Events...)
		if out.NextToken == "" || out.NextToken == next {
			return events, nil
		}
		next = out.NextToken
	}
	return events, nil
}

// FunctionEnvironment returns the environment variables of a deployed
// function (Lambda GetFunctionConfiguration, one signed REST call made by
// hand like FilterLogEvents).
func FunctionEnvironment(ctx context.Context, cfg aws.Config, endpoint, function string) (map[string]string, error) {
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda: credentials: %w", err)
	}
	u := strings.TrimRight(endpoint, "/") + "/2015-03-31/functions/" + url.PathEscape(function) + "/configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	raw, err := signedDo(ctx, creds, cfg.Region, "lambda", req, nil)
	if err != nil {
		return nil, fmt.Errorf("lambda: GetFunctionConfiguration %s: %w", function, err)
	}
	var out struct {
		Environment struct {
			Variables map[string]string `json:"Variables"`
		} `json:"Environment"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("lambda: GetFunctionConfiguration %s: %w", function, err)
	}
	return out.Environment.Variables, nil
}

// signedDo signs req (SigV4, body as its payload) for service, sends it and
// returns the body of a 200 response.
func signedDo(ctx context.Context, creds aws.Credentials, region, service string, req *http.Request, body []byte) ([]byte, error) {
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, region, time.Now()); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.300s", resp.Status, raw)
	}
	return raw, nil
}
