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
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "logs", cfg.Region, time.Now()); err != nil {
			return nil, fmt.Errorf("logs: sign: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("logs: FilterLogEvents: %w", err)
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("logs: FilterLogEvents: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("logs: FilterLogEvents %s: %s: %.300s", group, resp.Status, raw)
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
