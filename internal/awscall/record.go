package awscall

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// LogMessage is the message of the log line a deployed function writes per
// call when call logging is on; the call is its "aws_call" attribute.
const LogMessage = "aws call"

// LogSink writes each call as one log line (for deployed functions, whose
// logs the end-to-end test reads back).
func LogSink(log *slog.Logger) Sink {
	return func(ctx context.Context, c Call) {
		log.InfoContext(ctx, LogMessage, "aws_call", c)
	}
}

// Recording is what one test run recorded: the calls, and the binding from
// the run's physical names (tables, keys, sender) to the names the template
// resolves to (construct names such as LedgerTable, or the template's
// literal values such as its SES from address).
type Recording struct {
	Source  string            `json:"source"`
	Region  string            `json:"region"`
	Account string            `json:"account"`
	Binding map[string]string `json:"binding"`
	Calls   []Counted         `json:"calls"`
}

// Binding values that stand for the template's own settings rather than a
// resource's construct name.
const (
	SESFromAddress = "${SESFromAddress}"
	SESIdentity    = "${SESIdentity}"
	// SESConfigurationSet stands for the SES configuration set the stack's senders name (the
	// stack's own, or the one sesConfigurationSet names).
	SESConfigurationSet = "${SESConfigurationSet}"
)

// Construct names of the stack's resources the functions call by name: the
// stack defines them under these names, and the harnesses bind the physical
// names of their own tables, key and queue to them.
const (
	LedgerTable  = "LedgerTable"
	ContentTable = "ContentTable"
	BudgetTable  = "BudgetTable"
	// LimitsTable holds the send-limit counters and each subject's newest
	// challenge.
	LimitsTable   = "LimitsTable"
	ContentKey    = "ContentKey"
	DispatchQueue = "DispatchQueue"
	// AttemptProofKey is the KMS HMAC key dispatch signs attempts with and
	// events verifies provider events with.
	AttemptProofKey = "AttemptProofKey"
	// FingerprintKey is the KMS HMAC key dispatch MACs destinations with
	// (the destination limit's counter keys).
	FingerprintKey = "FingerprintKey"
	// IntentKey is the KMS HMAC key producers bind intents with and claim
	// verifies them with.
	IntentKey = "IntentKey"
	// WebhookSecret is the Secrets Manager secret the senders sign webhook
	// requests with. A harness binds the secret's name with its random
	// suffix (the last element of its ARN) to it.
	WebhookSecret = "WebhookSecret"
	// DigestBucket is the S3 bucket (Object Lock) the digest function writes
	// the signed digests to, and DigestKey the KMS ECC_NIST_P256 key it signs
	// them with (infra/digest.go's construct names).
	DigestBucket = "DigestBucket"
	DigestKey    = "DigestKey"
)

// Counted is a distinct call and how often it was made.
type Counted struct {
	Call
	Count int `json:"count"`
}

// Recorder collects distinct calls in memory.
type Recorder struct {
	mu    sync.Mutex
	calls map[string]*Counted
}

// Sink returns the recorder's sink.
func (r *Recorder) Sink() Sink {
	return func(_ context.Context, c Call) { r.Add(c) }
}

// Add records c.
func (r *Recorder) Add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]*Counted{}
	}
	k := c.Key()
	if e, ok := r.calls[k]; ok {
		e.Count++
		return
	}
	r.calls[k] = &Counted{Call: c, Count: 1}
}

// Calls returns the distinct calls so far, in a stable order.
func (r *Recorder) Calls() []Counted {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Counted, 0, len(r.calls))
	for _, c := range r.calls {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// DirEnv names the directory test runs write their recordings to; unset,
// nothing is written.
const DirEnv = "LEDGER_AWSCALL_DIR"

// WriteRecording writes rec as <dir>/<name>.json, dir from DirEnv. It does
// nothing when DirEnv is unset.
func WriteRecording(name string, rec Recording) error {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("awscall: %w", err)
	}
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return fmt.Errorf("awscall: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
}

// ReadRecordings reads every recording in dir.
func ReadRecordings(dir string) ([]Recording, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Recording
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var rec Recording
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("awscall: %s: %w", f, err)
		}
		if rec.Source == "" {
			rec.Source = filepath.Base(f)
		}
		out = append(out, rec)
	}
	return out, nil
}
