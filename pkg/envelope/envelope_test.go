package envelope_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const fakeARN = "arn:aws:kms:us-east-1:000000000000:key/11111111-2222-3333-4444-555555555555"

// fakeKMS wraps data keys with AES-GCM under a master key, authenticating the
// encryption context as AAD, as KMS does. With ignoreContext it behaves like
// an emulator that does not enforce the context. It records the plaintext
// key slices it hands out so tests can check they were zeroed.
type fakeKMS struct {
	master        [32]byte
	ignoreContext bool
	decryptErr    error

	mu       sync.Mutex
	handed   [][]byte
	lastDecr *kms.DecryptInput
}

func newFakeKMS(t *testing.T) *fakeKMS {
	f := &fakeKMS{}
	if _, err := rand.Read(f.master[:]); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeKMS) aead() cipher.AEAD {
	b, _ := aes.NewCipher(f.master[:])
	g, _ := cipher.NewGCM(b)
	return g
}

func (f *fakeKMS) aad(ctx map[string]string) []byte {
	if f.ignoreContext {
		return nil
	}
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, ctx[k])
	}
	return []byte(b.String())
}

func (f *fakeKMS) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	if in.KeySpec != types.DataKeySpecAes256 {
		return nil, fmt.Errorf("fake: want AES_256, got %q", in.KeySpec)
	}
	dk := make([]byte, 32)
	rand.Read(dk)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	blob := append(nonce, f.aead().Seal(nil, nonce, dk, f.aad(in.EncryptionContext))...)
	f.mu.Lock()
	f.handed = append(f.handed, dk)
	f.mu.Unlock()
	return &kms.GenerateDataKeyOutput{KeyId: aws.String(fakeARN), Plaintext: dk, CiphertextBlob: blob}, nil
}

func (f *fakeKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.mu.Lock()
	f.lastDecr = in
	f.mu.Unlock()
	if f.decryptErr != nil {
		return nil, f.decryptErr
	}
	if aws.ToString(in.KeyId) != fakeARN {
		return nil, &types.IncorrectKeyException{Message: aws.String("fake: incorrect key")}
	}
	if len(in.CiphertextBlob) < 12 {
		return nil, &types.InvalidCiphertextException{}
	}
	dk, err := f.aead().Open(nil, in.CiphertextBlob[:12], in.CiphertextBlob[12:], f.aad(in.EncryptionContext))
	if err != nil {
		return nil, &types.InvalidCiphertextException{}
	}
	f.mu.Lock()
	f.handed = append(f.handed, dk)
	f.mu.Unlock()
	return &kms.DecryptOutput{KeyId: aws.String(fakeARN), Plaintext: dk}, nil
}

func (f *fakeKMS) allZeroed(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.handed) == 0 {
		t.Fatal("fake KMS handed out no data key")
	}
	for i, k := range f.handed {
		if !bytes.Equal(k, make([]byte, len(k))) {
			t.Errorf("plaintext data key %d was not zeroed", i)
		}
	}
}

var (
	keyA = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-a", Channel: ledger.Email}.Key()
	keyB = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-b", Channel: ledger.Email}.Key()
)

func sealed(t *testing.T, s *envelope.Sealer, key string, m ledger.Message) []byte {
	t.Helper()
	e, err := s.Seal(context.Background(), key, m)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

// assertUnavailable checks err wraps ErrContentUnavailable and leaks nothing.
func assertUnavailable(t *testing.T, err error, m ledger.Message) {
	t.Helper()
	if !errors.Is(err, ledger.ErrContentUnavailable) {
		t.Fatalf("error %v does not wrap ErrContentUnavailable", err)
	}
	t.Logf("rejected: %v", err)
	assertNoLeak(t, err, m)
}

func assertNoLeak(t *testing.T, err error, m ledger.Message) {
	t.Helper()
	for _, s := range []string{ledgertest.Canary, m.To, m.Body} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error text %q contains message content", err)
		}
	}
}

func TestSealOpen(t *testing.T) {
	f := newFakeKMS(t)
	s := &envelope.Sealer{KMS: f, KeyID: "alias/reset"}
	o := &envelope.Opener{KMS: f, KeyARN: fakeARN}
	m := ledgertest.Message(1, ledger.Email)

	b := sealed(t, s, keyA, m)
	for _, secret := range []string{ledgertest.Canary, m.To, m.Body, "Reset your password"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("envelope contains plaintext %q: %s", secret, b)
		}
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if wire["v"] != 2.0 || wire["alg"] != "AES-256-GCM" || wire["kms_key_id"] != fakeARN {
		t.Errorf("envelope header = %v", wire)
	}

	got, err := o.Open(context.Background(), keyA, b)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got != m {
		t.Fatalf("Open = %+v, want %+v", got, m)
	}
	f.allZeroed(t)

	d := f.lastDecr
	if aws.ToString(d.KeyId) != fakeARN {
		t.Errorf("Decrypt KeyId = %q, want the pinned ARN", aws.ToString(d.KeyId))
	}
	want := map[string]string{"purpose": "password-reset-notification", "dedupe_key": keyA}
	if !reflect.DeepEqual(d.EncryptionContext, want) {
		t.Errorf("Decrypt EncryptionContext = %v, want %v", d.EncryptionContext, want)
	}
}

func TestSealUsesFreshKeyAndNonce(t *testing.T) {
	f := newFakeKMS(t)
	s := &envelope.Sealer{KMS: f, KeyID: fakeARN}
	m := ledgertest.Message(1, ledger.Email)
	e1, err := s.Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := s.Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(e1.EDK, e2.EDK) || bytes.Equal(e1.Nonce, e2.Nonce) || bytes.Equal(e1.CT, e2.CT) {
		t.Error("two seals of one message share a data key, nonce or ciphertext")
	}
}

func TestOpenRejectsUnauthentic(t *testing.T) {
	m := ledgertest.Message(2, ledger.SMS)
	flip := func(field string, i int) func(e *envelope.Envelope) {
		return func(e *envelope.Envelope) {
			b := map[string][]byte{"edk": e.EDK, "nonce": e.Nonce, "ct": e.CT}[field]
			b[i%len(b)] ^= 0x01
		}
	}
	tests := []struct {
		name          string
		ignoreContext bool // KMS that does not enforce the encryption context
		tamper        func(e *envelope.Envelope)
		openKey       string
		openARN       string
		raw           []byte
	}{
		{name: "tampered ciphertext", tamper: flip("ct", 3)},
		{name: "tampered GCM tag", tamper: func(e *envelope.Envelope) { e.CT[len(e.CT)-1] ^= 0x80 }},
		{name: "tampered nonce", tamper: flip("nonce", 0)},
		{name: "tampered data key", tamper: flip("edk", 20)},
		{name: "truncated ciphertext", tamper: func(e *envelope.Envelope) { e.CT = e.CT[:len(e.CT)-1] }},
		{name: "other dedupe key", openKey: keyB},
		{name: "other dedupe key, KMS ignores the context", ignoreContext: true, openKey: keyB},
		{name: "other KMS key", openARN: "arn:aws:kms:us-east-1:000000000000:key/99999999-2222-3333-4444-555555555555"},
		{name: "not JSON", raw: []byte("{\"v\":1," + ledgertest.Canary)},
		{name: "unknown version", tamper: func(e *envelope.Envelope) { e.V = 3 }},
		{name: "version 2 relabelled version 1", tamper: func(e *envelope.Envelope) { e.V = envelope.VersionUncompressed }},
		{name: "empty", raw: []byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeKMS(t)
			f.ignoreContext = tc.ignoreContext
			s := &envelope.Sealer{KMS: f, KeyID: fakeARN}
			e, err := s.Seal(context.Background(), keyA, m)
			if err != nil {
				t.Fatal(err)
			}
			if tc.tamper != nil {
				tc.tamper(&e)
			}
			b, _ := json.Marshal(e)
			if tc.raw != nil {
				b = tc.raw
			}
			key, arn := keyA, fakeARN
			if tc.openKey != "" {
				key = tc.openKey
			}
			if tc.openARN != "" {
				arn = tc.openARN
			}
			o := &envelope.Opener{KMS: f, KeyARN: arn}
			got, err := o.Open(context.Background(), key, b)
			assertUnavailable(t, err, m)
			if got != (ledger.Message{}) {
				t.Errorf("Open returned content with an error")
			}
		})
	}
}

func TestOpenTransientKMSErrorsAreRetryable(t *testing.T) {
	m := ledgertest.Message(3, ledger.Email)
	f := newFakeKMS(t)
	b := sealed(t, &envelope.Sealer{KMS: f, KeyID: fakeARN}, keyA, m)
	for _, kmsErr := range []error{
		&types.KMSInternalException{Message: aws.String("internal")},
		&types.DependencyTimeoutException{},
		&types.DisabledException{},
		context.DeadlineExceeded,
	} {
		f.decryptErr = kmsErr
		_, err := (&envelope.Opener{KMS: f, KeyARN: fakeARN}).Open(context.Background(), keyA, b)
		if err == nil || errors.Is(err, ledger.ErrContentUnavailable) {
			t.Errorf("%T: Open error %v, want a retryable error", kmsErr, err)
		}
		if !errors.Is(err, kmsErr) {
			t.Errorf("%T: Open error %v does not wrap the KMS error", kmsErr, err)
		}
		assertNoLeak(t, err, m)
	}
}

// kmsServer answers every KMS call with the given status and JSON error
// type, as the KMS JSON protocol does, so the classification is tested
// against the SDK's own error decoding.
func kmsServer(t *testing.T, status int, errType string) *kms.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":%q,"message":"from test server"}`, errType)
	}))
	t.Cleanup(srv.Close)
	return kmsClient(srv.URL)
}

func kmsClient(endpoint string) *kms.Client {
	return kms.New(kms.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(endpoint),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	})
}

func TestOpenClassifiesSDKErrors(t *testing.T) {
	m := ledgertest.Message(4, ledger.Email)
	b := sealed(t, &envelope.Sealer{KMS: newFakeKMS(t), KeyID: fakeARN}, keyA, m)
	tests := []struct {
		name        string
		client      func(t *testing.T) *kms.Client
		unavailable bool
	}{
		{"InvalidCiphertextException", func(t *testing.T) *kms.Client { return kmsServer(t, 400, "InvalidCiphertextException") }, true},
		{"IncorrectKeyException", func(t *testing.T) *kms.Client { return kmsServer(t, 400, "IncorrectKeyException") }, true},
		{"ThrottlingException", func(t *testing.T) *kms.Client { return kmsServer(t, 400, "ThrottlingException") }, false},
		{"KMSInternalException", func(t *testing.T) *kms.Client { return kmsServer(t, 500, "KMSInternalException") }, false},
		{"503", func(t *testing.T) *kms.Client { return kmsServer(t, 503, "ServiceUnavailable") }, false},
		{"AccessDeniedException", func(t *testing.T) *kms.Client { return kmsServer(t, 400, "AccessDeniedException") }, false},
		{"connection refused", func(t *testing.T) *kms.Client {
			srv := httptest.NewServer(http.NotFoundHandler())
			url := srv.URL
			srv.Close()
			return kmsClient(url)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &envelope.Opener{KMS: tc.client(t), KeyARN: fakeARN}
			_, err := o.Open(context.Background(), keyA, b)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if got := errors.Is(err, ledger.ErrContentUnavailable); got != tc.unavailable {
				t.Fatalf("errors.Is(ErrContentUnavailable) = %v, want %v (%v)", got, tc.unavailable, err)
			}
			assertNoLeak(t, err, m)
		})
	}
}

func TestSealErrors(t *testing.T) {
	m := ledgertest.Message(5, ledger.Email)
	if _, err := (&envelope.Sealer{KMS: newFakeKMS(t), KeyID: fakeARN}).Seal(context.Background(), "", m); err == nil {
		t.Error("Seal accepted an empty dedupe key")
	}
	_, err := (&envelope.Sealer{KMS: kmsServer(t, 400, "ThrottlingException"), KeyID: fakeARN}).Seal(context.Background(), keyA, m)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" {
		t.Errorf("Seal error %v does not wrap the KMS error", err)
	}
	if err != nil {
		assertNoLeak(t, err, m)
	}

	// Content encoding/json would have to alter cannot match its hash once
	// opened: refused before KMS is asked for a key.
	f := newFakeKMS(t)
	bad := m
	bad.Body += "\xff"
	if _, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN}).Seal(context.Background(), keyA, bad); err == nil || len(f.handed) != 0 {
		t.Errorf("Seal of a body that is not UTF-8: %v, %d data keys generated; want an error and none", err, len(f.handed))
	} else {
		assertNoLeak(t, err, bad)
	}
}

func TestParse(t *testing.T) {
	f := newFakeKMS(t)
	e, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN}).Seal(context.Background(), keyA, ledgertest.Message(6, ledger.Email))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.Marshal()
	got, err := envelope.Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal(e)): %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("Parse(Marshal(e)) = %+v, want %+v", got, e)
	}
	if !reflect.DeepEqual(envelope.Fields(), []string{"v", "alg", "kms_key_id", "dict", "edk", "nonce", "ct"}) {
		t.Errorf("Fields() = %v", envelope.Fields())
	}
	var doc map[string]any
	json.Unmarshal(b, &doc)
	for _, tc := range []struct {
		name  string
		edit  func(map[string]any)
		field string
	}{
		{"case-variant key", func(d map[string]any) { d["CT"] = d["ct"]; delete(d, "ct") }, ""},
		{"extra key", func(d map[string]any) { d["x"] = 1 }, ""},
		{"v as string", func(d map[string]any) { d["v"] = "1" }, "v"},
		{"alg null", func(d map[string]any) { d["alg"] = nil }, "alg"},
		{"edk not base64", func(d map[string]any) { d["edk"] = "%%%%" }, "edk"},
		{"nonce with newline", func(d map[string]any) { d["nonce"] = d["nonce"].(string)[:8] + "\n" + d["nonce"].(string)[8:] }, "nonce"},
		{"ct missing", func(d map[string]any) { delete(d, "ct") }, "ct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := map[string]any{}
			for k, v := range doc {
				d[k] = v
			}
			tc.edit(d)
			b, _ := json.Marshal(d)
			_, err := envelope.Parse(b)
			var fe *ledger.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Parse error = %v, want a field error on %q", err, tc.field)
			}
		})
	}
}
