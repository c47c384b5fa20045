package kmsseal_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// keyARN is the intent key the double holds.
const keyARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// answer is one HTTP response of the double, as KMS's endpoint writes it.
type answer struct {
	status int
	body   string
	// errorType, when set, is sent as KMS sends an error: X-Amzn-ErrorType
	// and {"__type": ..., "message": ...} with status.
	errorType string
	// hold keeps the request until it is cancelled or 5 s pass.
	hold bool
	// hangUp closes the connection without a response.
	hangUp bool
}

// kmsError is the answer KMS gives for an error of errorType.
func kmsError(status int, errorType, message string) *answer {
	return &answer{status: status, errorType: errorType, body: fmt.Sprintf(`{"__type":%q,"message":%q}`, errorType, message)}
}

// kmsDouble is a stand-in for AWS KMS's regional endpoint on a local
// httptest server, speaking KMS's JSON protocol (POST /, X-Amz-Target
// TrentService.<operation>, application/x-amz-json-1.1): the real SDK
// client and the real kmsseal code run against it, and only the answers
// are the double's. Without a fault it answers GenerateMac and VerifyMac as
// KMS does, with a real HMAC-SHA-256 under key (a wrong MAC is
// KMSInvalidMacException, status 400; the echoed KeyId is the key's ARN);
// fault, when it returns an answer, replaces KMS's.
type kmsDouble struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu    sync.Mutex
	calls []call
	fault func(op string, attempt int) *answer
}

// call is one request the double received.
type call struct {
	op           string
	keyID        string
	algorithm    string
	message, mac []byte
}

func newDouble(t *testing.T, key []byte) *kmsDouble {
	d := &kmsDouble{t: t, key: key}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

// setFault makes f decide the answers from now on (nil: KMS's).
func (d *kmsDouble) setFault(f func(op string, attempt int) *answer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault = f
	d.calls = nil
}

// received returns the requests so far.
func (d *kmsDouble) received() []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]call(nil), d.calls...)
}

func (d *kmsDouble) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "TrentService.")
	if r.Method != http.MethodPost || !ok || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		d.t.Errorf("not a signed KMS JSON request: %s %s target %q content type %q", r.Method, r.URL, target, r.Header.Get("Content-Type"))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var in struct {
		KeyId        string
		MacAlgorithm string
		Message, Mac []byte // base64 in JSON, as KMS's blobs are
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &in); err != nil {
		d.t.Errorf("%s body: %v", op, err)
	}
	d.mu.Lock()
	d.calls = append(d.calls, call{op: op, keyID: in.KeyId, algorithm: in.MacAlgorithm, message: in.Message, mac: in.Mac})
	attempt, fault := len(d.calls), d.fault
	d.mu.Unlock()

	a := d.kms(op, in.Message, in.Mac)
	if fault != nil {
		if f := fault(op, attempt); f != nil {
			a = f
		}
	}
	switch {
	case a.hold:
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	case a.hangUp:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", fmt.Sprintf("double-%d", attempt))
	if a.errorType != "" {
		w.Header().Set("X-Amzn-ErrorType", a.errorType)
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// kms is what KMS answers for a GenerateMac or VerifyMac under the key.
func (d *kmsDouble) kms(op string, message, mac []byte) *answer {
	h := hmac.New(sha256.New, d.key)
	h.Write(message)
	sum := h.Sum(nil)
	switch op {
	case "GenerateMac":
		return okJSON(map[string]any{"KeyId": keyARN, "MacAlgorithm": "HMAC_SHA_256", "Mac": sum})
	case "VerifyMac":
		if !hmac.Equal(sum, mac) {
			return kmsError(400, "KMSInvalidMacException", "The request was rejected because the HMAC verification failed.")
		}
		return okJSON(map[string]any{"KeyId": keyARN, "MacAlgorithm": "HMAC_SHA_256", "MacValid": true})
	}
	return kmsError(400, "UnsupportedOperationException", op+" is not in the double")
}

// okJSON is a 200 answer with v as its JSON body ([]byte as base64, as KMS
// encodes blobs).
func okJSON(v map[string]any) *answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &answer{status: 200, body: string(b)}
}

// client is a KMS client of the SDK pointed at the double, configured as
// the functions' clients are (the standard retryer, its 3 attempts),
// except that it waits no backoff between attempts.
func (d *kmsDouble) client() *kms.Client {
	return kms.New(kms.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(d.srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDDOUBLE", "double-secret", ""),
		HTTPClient:   d.srv.Client(),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
}
