package providerevent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/providerevent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The dedupe key the samples in testdata carry (tag idempotency_key, SMS
// context idempotency_key). The samples follow the record formats of the
// providers' documentation, recipient addresses and phone numbers included.
const sampleKey = "3f1c1a3d1fd0e7f5e4a6c2b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9"

// sampleProof is the attempt proof the samples' sends carried (tag and
// context attempt_proof), with attempt 1.
const sampleProof = "c2FtcGxlLXByb29mLW9mLWF0dGVtcHQtb25lLTAwMDA"

// secrets are the personal data in the samples; none may come out.
var secrets = []string{"player@example.com", "no-reply@game.example", "+14255550156", "+12065550152", "4255550156", "Reset your password", "550 5.1.1", "Mozilla"}

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecode(t *testing.T) {
	sesID, smsID := "0102018f3a7e-4b1c-example-000000", "862a8790-60c0-4430-9b2b-658bdexample"
	smsAt := time.UnixMilli(1764496803470).UTC()
	at := func(v string) time.Time { x, _ := time.Parse(time.RFC3339Nano, v); return x }
	tests := []struct {
		file string
		want ledger.ProviderEvent
	}{
		{"ses-send.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindProviderSent, Type: "Send", MessageID: sesID, At: at("2026-11-30T10:00:00.123Z")}},
		{"ses-delivery.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindDelivered, Type: "Delivery", MessageID: sesID, At: at("2026-11-30T10:00:02.456Z")}},
		{"ses-bounce-permanent.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindBounced, Type: "Bounce", Detail: "Permanent/General", MessageID: sesID, At: at("2026-11-30T10:00:03.789Z"), Permanent: true}},
		{"sns-envelope-bounce.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindBounced, Type: "Bounce", Detail: "Permanent/General", MessageID: sesID, At: at("2026-11-30T10:00:03.789Z"), Permanent: true}},
		{"ses-bounce-transient.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindBounced, Type: "Bounce", Detail: "Transient/MailboxFull", MessageID: sesID, At: at("2026-11-30T10:00:04Z")}},
		{"ses-complaint.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindComplained, Type: "Complaint", Detail: "abuse", MessageID: sesID, At: at("2026-11-30T11:00:00Z")}},
		{"ses-delivery-delay.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindDeliveryDelayed, Type: "DeliveryDelay", Detail: "TransientCommunicationFailure", MessageID: sesID, At: at("2026-11-30T10:05:00Z")}},
		{"ses-reject.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindProviderRejected, Type: "Reject", Detail: "Bad content", MessageID: sesID, At: at("2026-11-30T10:00:00.123Z"), Permanent: true}},
		{"ses-rendering-failure.json", ledger.ProviderEvent{Channel: ledger.Email, Kind: ledger.KindProviderRejected, Type: "Rendering Failure", MessageID: sesID, At: at("2026-11-30T10:00:00.123Z"), Permanent: true}},
		{"sms-delivered.json", ledger.ProviderEvent{Channel: ledger.SMS, Kind: ledger.KindDelivered, Type: "TEXT_DELIVERED", Detail: "DELIVERED", MessageID: smsID, At: smsAt}},
		{"sms-successful.json", ledger.ProviderEvent{Channel: ledger.SMS, Kind: ledger.KindProviderSent, Type: "TEXT_SUCCESSFUL", Detail: "SUCCESSFUL", MessageID: smsID, At: smsAt}},
		{"sms-blocked.json", ledger.ProviderEvent{Channel: ledger.SMS, Kind: ledger.KindDeliveryFailed, Type: "TEXT_BLOCKED", Detail: "BLOCKED", MessageID: smsID, At: smsAt, Permanent: true}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := providerevent.Decode(read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Key, tt.want.Attempt, tt.want.Proof = sampleKey, 1, sampleProof
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
			noSecrets(t, got)
		})
	}
}

func noSecrets(t *testing.T, p ledger.ProviderEvent) {
	t.Helper()
	all := strings.Join([]string{p.Key, p.Type, p.Detail, p.MessageID}, " ")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Fatalf("decoded event holds %q", s)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	send := string(read(t, "ses-send.json"))
	sms := string(read(t, "sms-delivered.json"))
	tests := []struct {
		name, body string
		want       error
	}{
		{"not JSON", "{not json", providerevent.ErrMalformed},
		{"empty object", "{}", providerevent.ErrMalformed},
		{"a JSON array", "[1,2]", providerevent.ErrMalformed},
		{"trailing data", send + "{}", providerevent.ErrMalformed},
		{"wrong field type", strings.Replace(send, `"messageId":"0102018f3a7e-4b1c-example-000000"`, `"messageId":7`, 1), providerevent.ErrMalformed},
		{"no message id", strings.Replace(send, `"messageId":"0102018f3a7e-4b1c-example-000000"`, `"messageId":""`, 1), providerevent.ErrMalformed},
		{"no time", strings.Replace(send, `"timestamp":"2026-11-30T10:00:00.123Z"`, `"timestamp":"yesterday"`, 1), providerevent.ErrMalformed},
		{"key not hex", strings.Replace(send, sampleKey, "player@example.com", 1), providerevent.ErrMalformed},
		{"no key tag", strings.Replace(send, `"idempotency_key"`, `"other"`, 1), providerevent.ErrNotOurs},
		{"SES open", string(read(t, "ses-open.json")), providerevent.ErrIgnored},
		{"SES type from the future", strings.Replace(send, `"eventType":"Send"`, `"eventType":"Teleport"`, 1), providerevent.ErrUnsupported},
		{"SMS status from the future", strings.Replace(sms, `"eventType":"TEXT_DELIVERED"`, `"eventType":"TEXT_TELEPORTED"`, 1), providerevent.ErrUnsupported},
		{"SMS no context key", strings.Replace(sms, `"idempotency_key"`, `"account"`, 1), providerevent.ErrNotOurs},
		{"SMS no time", strings.Replace(sms, `"eventTimestamp":1764496803470`, `"eventTimestamp":0`, 1), providerevent.ErrMalformed},
		{"voice event", `{"eventType":"VOICE_COMPLETED","messageId":"x"}`, providerevent.ErrIgnored},
		{"SNS confirmation", `{"Type":"SubscriptionConfirmation","TopicArn":"arn:aws:sns:eu-west-1:1:t","Message":"confirm"}`, providerevent.ErrMalformed},
		{"SNS wrapping garbage", `{"Type":"Notification","TopicArn":"arn:aws:sns:eu-west-1:1:t","Message":"not json"}`, providerevent.ErrMalformed},
		// A record that would decode but for its size: only the bound refuses it.
		{"over 1 MiB", strings.Replace(send, "{", `{"pad":"`+strings.Repeat("a", providerevent.MaxBody)+`",`, 1), providerevent.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := providerevent.Decode([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes %q: %v", s, err)
				}
			}
		})
	}
}

// A provider may put anything in its detail fields: what is not a short
// token is withheld, never stored.
func TestDecodeWithholdsOddDetail(t *testing.T) {
	body := strings.Replace(string(read(t, "ses-reject.json")), `"reason":"Bad content"`, `"reason":"Bad content for player@example.com"`, 1)
	got, err := providerevent.Decode([]byte(body))
	if err != nil || got.Detail != "(withheld)" {
		t.Fatalf("detail %q, err %v", got.Detail, err)
	}
	body = strings.Replace(string(read(t, "sms-blocked.json")), `"messageStatus":"BLOCKED"`, `"messageStatus":"BLOCKED 4255550156"`, 1)
	if got, err = providerevent.Decode([]byte(body)); err != nil || got.Detail != "(withheld)" {
		t.Fatalf("detail %q, err %v", got.Detail, err)
	}
}

// FuzzDecode: whatever arrives, Decode does not panic, and an event it
// returns is one the ledger accepts and that holds no address.
func FuzzDecode(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			f.Add(read(f, e.Name()))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := providerevent.Decode(body)
		if err != nil {
			for _, sentinel := range []error{providerevent.ErrMalformed, providerevent.ErrUnsupported, providerevent.ErrNotOurs, providerevent.ErrIgnored} {
				if errors.Is(err, sentinel) {
					return
				}
			}
			t.Fatalf("error outside the four kinds: %v", err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded an event the ledger refuses: %v", err)
		}
		if strings.Contains(p.Type+p.Detail+p.MessageID, "@") {
			t.Fatalf("decoded event holds an address: %+v", p)
		}
	})
}

// TestDecodeAttemptWithoutProof: the decoder reads what the event carries
// about the attempt and refuses nothing for it; an event with no proof, a
// proof too long to be one or an attempt that is no number decodes with
// neither, and the ledger refuses it as unproven.
func TestDecodeAttemptWithoutProof(t *testing.T) {
	body := string(read(t, "ses-delivery.json"))
	for name, mut := range map[string]func(string) string{
		"no proof": func(b string) string {
			return strings.Replace(b, `"attempt_proof":["`+sampleProof+`"]`, `"x":["y"]`, 1)
		},
		"long proof": func(b string) string {
			return strings.Replace(b, sampleProof, strings.Repeat("A", 129), 1)
		},
		"attempt not a number": func(b string) string { return strings.Replace(b, `"attempt":["1"]`, `"attempt":["one"]`, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			mutated := mut(body)
			if mutated == body {
				t.Fatal("the mutation changed nothing")
			}
			got, err := providerevent.Decode([]byte(mutated))
			if err != nil {
				t.Fatal(err)
			}
			if name == "attempt not a number" {
				if got.Attempt != 0 || got.Proof != sampleProof {
					t.Fatalf("attempt %d proof %q", got.Attempt, got.Proof)
				}
				return
			}
			if got.Proof != "" || got.Attempt != 1 {
				t.Fatalf("attempt %d proof %q, want attempt 1 and no proof", got.Attempt, got.Proof)
			}
		})
	}
}
