package dispatchqueue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/dispatchqueue"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestDelay(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   time.Duration
		want int32
	}{
		{-time.Second, 0}, {0, 0}, {999 * time.Millisecond, 0}, {1500 * time.Millisecond, 1},
		{14*time.Minute + 59*time.Second, 899}, {time.Hour, 900},
	} {
		if got := dispatchqueue.Delay(now.Add(tt.in), now); got != tt.want {
			t.Errorf("Delay(+%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.Email}.Key()
	if got, err := dispatchqueue.Parse(`{"key":"` + key + `"}`); err != nil || got != key {
		t.Fatalf("Parse: %q, %v", got, err)
	}
	for _, body := range []string{"", "null", `{"key":"x"}`, `{"key":"` + key + `","to":"someone@example.test"}`, `{"key":"` + key + `"} {}`, `["` + key + `"]`} {
		_, err := dispatchqueue.Parse(body)
		if !errors.Is(err, dispatchqueue.ErrBadMessage) {
			t.Errorf("Parse(%q) = %v, want ErrBadMessage", body, err)
		}
		if err != nil && strings.Contains(err.Error(), "example.test") {
			t.Errorf("error repeats the body: %v", err)
		}
	}
}

// TestBody: what Schedule sends is what Parse reads back, and a value that
// is not a dedupe key never becomes a message.
func TestBody(t *testing.T) {
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.SMS}.Key()
	at := time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.UTC)
	body, err := dispatchqueue.Body(key, at)
	if err != nil {
		t.Fatal(err)
	}
	if got, due, err := dispatchqueue.ParseDue(body); err != nil || got != key || !due.Equal(at) {
		t.Fatalf("ParseDue(Body) = %q, %s, %v; want %q, %s", got, due, err, key, at)
	}
	if _, err := dispatchqueue.Body("not-a-key", at); err == nil {
		t.Fatal("made a message of a value that is not a dedupe key")
	}
}
