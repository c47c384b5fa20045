// Package e2e checks the whole ledger end to end on a stack deployed to a
// local emulator by localstack/deploy-local.sh: intents published with
// pkg/producer travel through the deployed queue, the claim and dispatch
// functions and the real transports (SES in the emulator, the webhook
// transport to cmd/webhook-provider), and the test counts what was sent.
//
// The test reads the deployment's CloudFormation outputs (the file
// `cdk deploy --outputs-file` wrote, .run/outputs.json by default, or
// E2E_OUTPUTS). It is skipped when that file is missing, and fails instead
// when E2E_REQUIRED=1.
//
// This file holds what the test and the devstack helper command share: the
// outputs, readers for what the emulator's SES and the local webhook
// provider captured, and the wait for a row to be terminal.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

// Outputs are the stack outputs of one deployed stage, read by the names
// package outputs declares.
type Outputs struct {
	Stack               string
	IntentQueueURL      string
	IntentDLQURL        string
	StreamFailureDLQURL string
	LedgerTable         string
	ContentTable        string
	ContentKeyARN       string
	BudgetTable         string
	LimitsTable         string
	DispatchQueueURL    string
	DispatchQueueDLQURL string
	ClaimFunction       string
	DispatchFunction    string
	ReconcileFunction   string
	ExpireFunction      string
	// ProviderEventsTopicARN is the topic SES and SMS publish events to.
	ProviderEventsTopicARN string
	// AttemptProofKeyARN is the HMAC key dispatch signs each send's attempt with.
	AttemptProofKeyARN string
	// IntentKeyARN is the HMAC key producers bind intents with; FingerprintKeyARN the one
	// dispatch MACs destinations with.
	IntentKeyARN, FingerprintKeyARN string
	// SESConfigurationSet is the SES configuration set the senders send with.
	SESConfigurationSet string
	// All holds every output of the stage by name.
	All map[string]string
}

// ReadOutputs reads a `cdk deploy --outputs-file` file holding exactly one
// stack and checks that every required output is there.
func ReadOutputs(path string) (Outputs, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Outputs{}, err
	}
	var stacks map[string]map[string]string
	if err := json.Unmarshal(raw, &stacks); err != nil {
		return Outputs{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(stacks) != 1 {
		names := slices.Sorted(maps.Keys(stacks))
		return Outputs{}, fmt.Errorf("%s: want the outputs of one stack, found %d %v", path, len(stacks), names)
	}
	var out Outputs
	for name, all := range stacks {
		out.Stack, out.All = name, all
	}
	var missing []string
	for _, o := range outputs.All() {
		if o.Required && out.All[o.Name] == "" {
			missing = append(missing, o.Name)
		}
	}
	if len(missing) > 0 {
		return Outputs{}, fmt.Errorf("%s: stack %s lacks outputs %v", path, out.Stack, missing)
	}
	get := func(o outputs.Output) string { return out.All[o.Name] }
	out.IntentQueueURL, out.IntentDLQURL, out.StreamFailureDLQURL = get(outputs.IntentQueueURL), get(outputs.IntentDLQURL), get(outputs.StreamFailureDLQURL)
	out.LedgerTable, out.ContentTable, out.BudgetTable = get(outputs.LedgerTable), get(outputs.ContentTable), get(outputs.BudgetTable)
	out.ContentKeyARN, out.AttemptProofKeyARN = get(outputs.ContentKeyARN), get(outputs.AttemptProofKeyARN)
	out.IntentKeyARN, out.FingerprintKeyARN = get(outputs.IntentKeyARN), get(outputs.FingerprintKeyARN)
	out.LimitsTable = get(outputs.LimitsTable)
	out.DispatchQueueURL, out.DispatchQueueDLQURL = get(outputs.DispatchQueueURL), get(outputs.DispatchQueueDLQURL)
	out.ClaimFunction, out.DispatchFunction = get(outputs.Function(settings.Claim)), get(outputs.Function(settings.Dispatch))
	out.ReconcileFunction, out.ExpireFunction = get(outputs.Function(settings.Reconcile)), get(outputs.Function(settings.Expire))
	out.ProviderEventsTopicARN, out.SESConfigurationSet = get(outputs.ProviderEventsTopicARN), get(outputs.SESConfigurationSet)
	return out, nil
}

// LogGroup is the log group of a function the stack defines.
func LogGroup(function string) string { return "/aws/lambda/" + function }

// Email is one message the emulator's SES accepted, as its capture endpoint
// (GET <endpoint>/_ministack/ses/messages) lists it. The emulator drops the
// message tags, so a test matches messages by recipient.
type Email struct {
	MessageID string   `json:"MessageId"`
	Source    string   `json:"Source"`
	To        []string `json:"To"`
	Subject   string   `json:"Subject"`
	BodyText  string   `json:"BodyText"`
	Timestamp float64  `json:"Timestamp"`
}

// Sent is when SES accepted the message.
func (e Email) Sent() time.Time {
	return time.UnixMilli(int64(e.Timestamp * 1000)).UTC()
}

// CapturedEmails lists every message the emulator's SES captured, in every
// account, oldest first.
func CapturedEmails(ctx context.Context, client *http.Client, endpoint string) ([]Email, error) {
	var page struct {
		Messages map[string][]Email `json:"messages"`
	}
	if err := getJSON(ctx, client, strings.TrimRight(endpoint, "/")+"/_ministack/ses/messages", &page); err != nil {
		return nil, fmt.Errorf("SES capture: %w", err)
	}
	var all []Email
	for _, msgs := range page.Messages {
		all = append(all, msgs...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Timestamp < all[j].Timestamp })
	return all, nil
}

// EmailsTo returns the messages addressed to to.
func EmailsTo(all []Email, to string) []Email {
	var out []Email
	for _, m := range all {
		for _, addr := range m.To {
			if strings.EqualFold(addr, to) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// ProviderMessages lists every message the local webhook provider recorded
// (GET <base>/messages), oldest first.
func ProviderMessages(ctx context.Context, client *http.Client, base string) ([]webhooktest.RecordedMessage, error) {
	var msgs []webhooktest.RecordedMessage
	if err := getJSON(ctx, client, base+"/messages", &msgs); err != nil {
		return nil, fmt.Errorf("webhook provider: %w", err)
	}
	return msgs, nil
}

func getJSON(ctx context.Context, client *http.Client, url string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// ErrTimeout is returned by Poll when the deadline passes first.
var ErrTimeout = errors.New("e2e: timed out")

// Poll calls check every interval until it reports done, returns an error,
// or timeout passes (then ErrTimeout wrapping the last check's note).
func Poll(ctx context.Context, timeout, interval time.Duration, check func(ctx context.Context) (done bool, note string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, note, err := check(ctx)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v: %s", ErrTimeout, timeout, note)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// RowReader reads ledger rows (a dynamostore.Store does).
type RowReader interface {
	Get(ctx context.Context, key string) (ledger.Entry, error)
}

// WaitTerminal polls the row of key every interval until it is terminal and
// returns it; ErrTimeout after timeout says whether there was a row at all
// and the state it was last seen in.
func WaitTerminal(ctx context.Context, rows RowReader, key string, timeout, interval time.Duration) (ledger.Entry, error) {
	var row ledger.Entry
	err := Poll(ctx, timeout, interval, func(ctx context.Context) (bool, string, error) {
		e, err := rows.Get(ctx, key)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, "no ledger row yet", nil
		}
		if err != nil {
			return false, "", err
		}
		row = e
		return e.State.Terminal(), "row still " + string(e.State), nil
	})
	return row, err
}
