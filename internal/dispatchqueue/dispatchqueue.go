// Package dispatchqueue is the message of the dispatch queue, the Amazon SQS
// queue that hands ledger rows back to the dispatch function: package
// sqsqueue sends them (it implements ledger.Scheduler), the dispatch handler
// reads them with Parse. This package imports no SDK client, so a function
// that only reads the messages does not link SQS's.
//
// A message carries one dedupe key and the time the row is due, in Unix
// milliseconds ({"key": "<key>", "at": <ms>}), and nothing else: no
// address, token or content, so the queue holds nothing secret. Dispatch
// reports the due times it has taken as the queue's mark (ledger.Progress).
// A message without "at" (sent before it existed) still parses. A row due
// later is sent with an SQS delay (whole seconds, at most 15 minutes), so
// it arrives at most a second before it is due; dispatch waits that out
// (Policy.BudgetWait is at least a second). A row due more than 15 minutes
// ahead arrives early and is scheduled again. Delivery is at least once:
// dispatch's conditional write decides, as for stream records.
package dispatchqueue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// MaxDelay is the longest delay SQS gives one message.
const MaxDelay = 900 * time.Second

// ErrBadMessage is wrapped by Parse errors.
var ErrBadMessage = errors.New("dispatchqueue: bad message")

// message is the wire form.
type message struct {
	Key string `json:"key"`
	At  int64  `json:"at,omitempty"`
}

// Delay is the whole-second SQS delay for a row due at at, from now: never
// after at, at most MaxDelay.
func Delay(at, now time.Time) int32 {
	d := at.Sub(now)
	if d <= 0 {
		return 0
	}
	return int32(min(d, MaxDelay) / time.Second)
}

// Body returns the message that hands back the row with dedupe key key,
// due at at. A value that is not a dedupe key is refused: nothing else
// reaches the queue.
func Body(key string, at time.Time) (string, error) {
	if !ledger.IsDedupeKey(key) {
		return "", fmt.Errorf("dispatchqueue: refusing to schedule a value that is not a dedupe key")
	}
	body, err := json.Marshal(message{Key: key, At: at.UnixMilli()})
	if err != nil {
		return "", fmt.Errorf("dispatchqueue: %w", err)
	}
	return string(body), nil
}

// Parse returns the dedupe key a message body carries. Anything else, an
// unknown field included, is an error wrapping ErrBadMessage that does not
// repeat the body.
func Parse(body string) (string, error) {
	key, _, err := ParseDue(body)
	return key, err
}

// ParseDue returns the dedupe key a message body carries and the time the
// row was due when it was scheduled (zero if the message does not say).
func ParseDue(body string) (string, time.Time, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var m message
	if err := dec.Decode(&m); err != nil {
		return "", time.Time{}, fmt.Errorf("%w: not a {\"key\": ...} object", ErrBadMessage)
	}
	if dec.More() {
		return "", time.Time{}, fmt.Errorf("%w: trailing data", ErrBadMessage)
	}
	if !ledger.IsDedupeKey(m.Key) {
		return "", time.Time{}, fmt.Errorf("%w: key is not a dedupe key", ErrBadMessage)
	}
	var at time.Time
	if m.At > 0 {
		at = time.UnixMilli(m.At).UTC()
	}
	return m.Key, at, nil
}
