package envelope_test

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// intentsFile holds one vector per notification: every value a producer
// computes from it, with the data key and nonce fixed so that the envelope
// and the intent body are reproducible byte for byte.
const intentsFile = "intents.json"

// vectorKeyID is the KMS key ARN the vectors' GenerateDataKey "returned".
const vectorKeyID = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// vectorIntentKeyID is the intent key the vectors' GenerateMac "used".
const vectorIntentKeyID = "arn:aws:kms:us-east-1:111122223333:key/5678efab-56ef-78ab-90cd-5678901234ef"

// generateMac is what KMS GenerateMac returned for a vector's binding.
type generateMac struct {
	KeyID        string `json:"KeyId"`
	MacAlgorithm string `json:"MacAlgorithm"`
	Mac          string `json:"Mac_base64"`
}

type intentsDoc struct {
	Description string         `json:"description"`
	Vectors     []intentVector `json:"vectors"`
}

// generateDataKey is what KMS GenerateDataKey returned for a vector.
type generateDataKey struct {
	KeyID          string `json:"KeyId"`
	PlaintextHex   string `json:"Plaintext_hex"`
	CiphertextBlob string `json:"CiphertextBlob_base64"`
}

type intentVector struct {
	Name                   string               `json:"name"`
	Notification           vectors.Notification `json:"notification"`
	DedupeKeyPreimage      string               `json:"dedupe_key_preimage"`
	DedupeKey              string               `json:"dedupe_key"`
	ContentHashPreimageHex string               `json:"content_hash_preimage_hex"`
	ContentHash            string               `json:"content_hash"`
	Plaintext              string               `json:"plaintext"`
	PlaintextHex           string               `json:"plaintext_hex"`
	DeflateHex             string               `json:"deflate_hex,omitempty"`
	EncryptionContext      map[string]string    `json:"encryption_context"`
	AADHex                 string               `json:"aad_hex"`
	GenerateDataKey        generateDataKey      `json:"generate_data_key"`
	NonceHex               string               `json:"nonce_hex"`
	SealedContent          sealedContent        `json:"sealed_content"`
	EnvelopePreimage       string               `json:"envelope_preimage,omitempty"`
	Envelope               string               `json:"envelope,omitempty"`
	Binding                string               `json:"binding"`
	GenerateMac            generateMac          `json:"generate_mac"`
	IntentMAC              string               `json:"intent_mac"`
	Body                   string               `json:"body"`
}

// intentInputs are the notifications of intents.json.
func intentInputs() []struct {
	name string
	n    vectors.Notification
} {
	base := func(challenge, ch string) vectors.Notification {
		n := vectors.Notification{
			ChallengeID: challenge, Channel: ch, Workflow: vectors.Workflow{Kind: "single"},
			DestinationRef: "acct-1001:" + ch, IssuedAt: "2026-11-30T10:42:52.306Z", ExpiresAt: "2026-11-30T10:52:52.306Z",
			TemplateID: "reset-" + ch, TemplateVersion: "3", PolicyVersion: "policy-1",
			Message: vectors.Message{
				To:      vectors.Plain("player1001@example.com"),
				Subject: vectors.Plain("Reset your password"),
				Body:    vectors.Plain("Reset your password within 10 minutes:\nhttps://game.example.com/reset?token=4f9c2a61d0e8b7a5"),
			},
		}
		if ch == "sms" {
			n.Message.To = vectors.Plain("+15555550123")
			n.Message.Subject = vectors.Plain("")
			n.Message.Body = vectors.Plain("Reset your password: https://game.example.com/r/4f9c2a61d0e8b7a5 (10 min)")
		}
		return n
	}
	type in = struct {
		name string
		n    vectors.Notification
	}
	var out []in
	out = append(out, in{"email single", base("chal-7f3a9c01", "email")})
	out = append(out, in{"sms single, empty subject", base("chal-7f3a9c02", "sms")})
	for _, ch := range []string{"email", "sms"} {
		n := base("chal-7f3a9c03", ch)
		n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"email", "sms"}}
		out = append(out, in{"fallback email then sms: " + ch, n})
	}
	for _, ch := range []string{"email", "sms"} {
		n := base("chal-7f3a9c04", ch)
		n.Workflow = vectors.Workflow{Kind: "dual"}
		out = append(out, in{"dual: " + ch, n})
	}
	n := base("chal-7f3a9c05", "email")
	n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"sms", "email"}}
	n.Message.Subject = vectors.Plain("Ré-initialisez votre mot de passe <maintenant> & vite")
	n.Message.Body = vectors.Plain("Bonjour \"joueur\" \\ 😀\t<a href=\"https://game.example.com/reset?a=1&b=2\">reset</a>\r\n" +
		"line\u2028separator\u2029paragraph \x01\x1f\x7f\b\f / é 中文")
	out = append(out, in{"escapes and non-ASCII characters", n})
	n = base(strings.Repeat("A-z_0.9:", 16), "sms")
	n.DestinationRef = strings.Repeat("Zz09._:-", 32)
	n.TemplateID = strings.Repeat("t", 64)
	n.TemplateVersion = strings.Repeat("v", 32)
	n.PolicyVersion = strings.Repeat("p", 32)
	n.Message.Body = vectors.Plain(strings.Repeat("0123456789", 30) + "!")
	n.IssuedAt, n.ExpiresAt = "2026-11-30T10:40:00Z", "2026-11-30T10:50:00Z"
	out = append(out, in{"longest identifiers, body over 255 bytes, whole-second times", n})
	n = base("chal-7f3a9c07", "email")
	n.IssuedAt, n.ExpiresAt = "2026-11-30T10:40:00.25Z", "2026-11-30T10:50:00.5Z"
	out = append(out, in{"times with trailing-zero fractions", n})
	n = base("chal-7f3a9c0b", "email")
	n.IssuedAt, n.ExpiresAt = "2026-11-30T11:42:52.306+01:00", "2026-11-30T11:52:52.306+01:00"
	out = append(out, in{"times with an offset (written back in UTC)", n})
	n = base("chal-7f3a9c08", "email")
	n.SubjectRef = "acct-1001"
	out = append(out, in{"with subject_ref", n})
	for _, ch := range []string{"email", "sms"} {
		n := base("chal-7f3a9c09", ch)
		n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"sms", "email"}}
		n.SubjectRef = "tenant-7:acct_1001.eu"
		out = append(out, in{"fallback sms then email with subject_ref: " + ch, n})
	}
	n = base("chal-7f3a9c0a", "sms")
	n.SubjectRef = strings.Repeat("Zz09._:-", 32)
	out = append(out, in{"longest subject_ref", n})
	return out
}

// contentHashPreimage writes the layout of docs/intent-v2.md independently
// of ledger.ContentHash: the domain string, then each field, each after its
// length as 8 bytes big-endian.
func contentHashPreimage(templateID, templateVersion string, m ledger.Message) []byte {
	var b bytes.Buffer
	for _, f := range []string{"reset-notification-content-v1", templateID, templateVersion, m.To, m.Subject, m.Body} {
		_ = binary.Write(&b, binary.BigEndian, uint64(len(f)))
		b.WriteString(f)
	}
	return b.Bytes()
}

func generateIntentVector(t *testing.T, name string, n vectors.Notification, dict []byte) intentVector {
	t.Helper()
	p, err := n.Producer()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	id := n.Identity()
	key := id.Key()
	v := intentVector{Name: name, Notification: n, DedupeKeyPreimage: "password-reset:" + n.ChallengeID + ":" + n.Channel, DedupeKey: key}
	if sum := sha256.Sum256([]byte(v.DedupeKeyPreimage)); hex.EncodeToString(sum[:]) != key {
		t.Fatalf("%s: dedupe key %s is not the SHA-256 of %q", name, key, v.DedupeKeyPreimage)
	}
	pre := contentHashPreimage(p.TemplateID, p.TemplateVersion, p.Message)
	v.ContentHashPreimageHex, v.ContentHash = hex.EncodeToString(pre), ledger.ContentHash(p.TemplateID, p.TemplateVersion, p.Message)
	if sum := sha256.Sum256(pre); hex.EncodeToString(sum[:]) != v.ContentHash {
		t.Fatalf("%s: content hash %s is not the SHA-256 of the documented layout", name, v.ContentHash)
	}
	pt, err := envelope.Plaintext(p.Message)
	if err != nil {
		t.Fatal(err)
	}
	v.Plaintext, v.PlaintextHex = string(pt), hex.EncodeToString(pt)
	z, err := envelope.Compress(pt, dict)
	if err != nil {
		t.Fatal(err)
	}
	v.DeflateHex = hex.EncodeToString(z)
	v.EncryptionContext = envelope.EncryptionContext(key)
	v.AADHex = hex.EncodeToString([]byte(key))

	dk := sha256.Sum256([]byte("resetledger test vector data key: " + name))
	nonce := sha256.Sum256([]byte("resetledger test vector nonce: " + name))
	blob := sha512.Sum512([]byte("resetledger test vector data key blob: " + name))
	v.GenerateDataKey = generateDataKey{KeyID: vectorKeyID, PlaintextHex: hex.EncodeToString(dk[:]), CiphertextBlob: base64.StdEncoding.EncodeToString(blob[:])}
	v.NonceHex = hex.EncodeToString(nonce[:12])
	env, err := envelope.SealWith(key, pt, dict, dk[:], blob[:], vectorKeyID, nonce[:12])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &v.SealedContent); err != nil {
		t.Fatal(err)
	}
	// The envelope's digest, written here independently of
	// Envelope.DigestPreimage, and the binding, independently of
	// intent.Binding, and the MAC the vector's GenerateMac returned for it.
	v.EnvelopePreimage = envelopeLayout(v.SealedContent)
	sum := sha256.Sum256([]byte(v.EnvelopePreimage))
	v.Envelope = hex.EncodeToString(sum[:])
	if string(env.DigestPreimage()) != v.EnvelopePreimage || env.Digest() != v.Envelope {
		t.Fatalf("%s: the envelope digest is not the documented layout:\n%s", name, env.DigestPreimage())
	}
	v.Binding = bindingLayout(p, key, v.Envelope)
	mac := sha256.Sum256([]byte("resetledger test vector intent mac: " + name))
	v.GenerateMac = generateMac{KeyID: vectorIntentKeyID, MacAlgorithm: "HMAC_SHA_256", Mac: base64.StdEncoding.EncodeToString(mac[:])}
	v.IntentMAC = base64.RawURLEncoding.EncodeToString(mac[:])
	// The producer's body with this envelope and MAC is the intent on the wire.
	q := &bodyQueue{}
	signer := &fixedSigner{t: t, want: v.Binding, seal: v.IntentMAC}
	pr := &producer.Producer{Queue: q, QueueURL: "https://sqs.test/intents", Sealer: fixedSealer{env}, Seals: signer,
		Clock: func() time.Time { return p.ExpiresAt.Add(-time.Minute) }}
	if _, err := pr.Publish(context.Background(), p); err != nil {
		t.Fatalf("%s: Publish: %v", name, err)
	}
	v.Body = q.body
	return v
}

// envelopeLayout writes the envelope digest's preimage of docs/intent-v2.md
// §1.6 independently of Envelope.DigestPreimage: the domain line, then one
// line per envelope member in wire order (dict in version 3 only),
// "<name>:<byte length>:<value>",
// each value as the JSON carries it (v in decimal, base64 as written).
func envelopeLayout(e sealedContent) string {
	b := "resetledger-intent-envelope/v1\n"
	for _, f := range [][2]string{{"v", strconv.Itoa(e.V)}, {"alg", e.Alg}, {"kms_key_id", e.KMSKeyID},
		{"dict", e.Dict}, {"edk", e.EDK}, {"nonce", e.Nonce}, {"ct", e.CT}} {
		if f[0] == "dict" && e.V != 3 {
			continue
		}
		b += f[0] + ":" + strconv.Itoa(len(f[1])) + ":" + f[1] + "\n"
	}
	return b
}

// bindingLayout writes the version 3 binding of docs/intent-v2.md
// independently of intent.Binding: the domain line, then one line per
// bound field, "<name>:<byte length>:<value>", times as RFC 3339 in UTC
// with the fraction's trailing zeros dropped (Go's RFC3339Nano), the
// fallback order joined by commas, and last the envelope's digest.
func bindingLayout(p producer.Notification, dedupeKey, envelopeDigest string) string {
	order := make([]string, len(p.Workflow.Order))
	for i, c := range p.Workflow.Order {
		order[i] = string(c)
	}
	fields := [][2]string{
		{"schema_version", "3"}, {"purpose", "password-reset"}, {"challenge_id", p.ChallengeID},
		{"channel", string(p.Channel)}, {"dedupe_key", dedupeKey}, {"workflow.kind", string(p.Workflow.Kind)},
		{"workflow.order", strings.Join(order, ",")}, {"destination_ref", p.DestinationRef}, {"subject_ref", p.SubjectRef},
		{"issued_at", p.IssuedAt.UTC().Format(time.RFC3339Nano)}, {"expires_at", p.ExpiresAt.UTC().Format(time.RFC3339Nano)},
		{"template_id", p.TemplateID}, {"template_version", p.TemplateVersion}, {"policy_version", p.PolicyVersion},
		{"content_hash", ledger.ContentHash(p.TemplateID, p.TemplateVersion, p.Message)}, {"envelope", envelopeDigest},
	}
	b := "resetledger-intent-binding/v3\n"
	for _, f := range fields {
		b += f[0] + ":" + strconv.Itoa(len(f[1])) + ":" + f[1] + "\n"
	}
	return b
}

// fixedSigner answers the vector's MAC, and fails the test if the producer
// asks it to seal anything but the vector's binding.
type fixedSigner struct {
	t          *testing.T
	want, seal string
}

func (f *fixedSigner) Sign(_ context.Context, binding []byte) (string, error) {
	if string(binding) != f.want {
		f.t.Errorf("the producer sealed\n%q\nwant the documented binding\n%q", binding, f.want)
	}
	return f.seal, nil
}

// sealedContent is the envelope as JSON carries it (base64 strings).
type sealedContent struct {
	V        int    `json:"v"`
	Alg      string `json:"alg"`
	KMSKeyID string `json:"kms_key_id"`
	Dict     string `json:"dict,omitempty"`
	EDK      string `json:"edk"`
	Nonce    string `json:"nonce"`
	CT       string `json:"ct"`
}

type fixedSealer struct{ env envelope.Envelope }

func (f fixedSealer) Seal(context.Context, string, ledger.Message) (envelope.Envelope, error) {
	return f.env, nil
}

type bodyQueue struct{ body string }

func (q *bodyQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.body = aws.ToString(in.MessageBody)
	return &sqs.SendMessageOutput{MessageId: aws.String("vector")}, nil
}

// vectorKMS decrypts exactly the data key of one vector, under its key and
// encryption context, as KMS would.
type vectorKMS struct {
	v   intentVector
	key string
}

func (k vectorKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	blob, _ := base64.StdEncoding.DecodeString(k.v.GenerateDataKey.CiphertextBlob)
	if !bytes.Equal(in.CiphertextBlob, blob) || aws.ToString(in.KeyId) != k.v.GenerateDataKey.KeyID ||
		!maps.Equal(in.EncryptionContext, envelope.EncryptionContext(k.key)) {
		return nil, &types.InvalidCiphertextException{Message: aws.String("vector: not this data key, key or context")}
	}
	dk, _ := hex.DecodeString(k.v.GenerateDataKey.PlaintextHex)
	return &kms.DecryptOutput{KeyId: aws.String(k.v.GenerateDataKey.KeyID), Plaintext: dk}, nil
}

// TestVectorsIntents checks every vector of intents.json against the Go
// implementation, field by field: the dedupe key and content hash layouts,
// the sealed plaintext, the AAD and encryption context, the envelope sealed
// with the vector's data key and nonce, and the intent body the producer
// publishes. Then the consumer's side: the body decodes, and the envelope
// opens (with the vector's data key) to a message with the recorded hash.
func TestVectorsIntents(t *testing.T) {
	var doc intentsDoc
	vectors.Load(t, intentsFile, &doc)
	generated := intentsDoc{
		Description: "Notifications and what a producer computes from each: dedupe key, content hash (with its preimage), " +
			"the sealed plaintext, the GCM AAD and KMS encryption context, the envelope sealed with the data key and nonce given " +
			"here (normally from GenerateDataKey and random), the envelope digest (with its preimage), the binding the intent key seals (version 3: the fields and the envelope digest) and the MAC given here (normally from " +
			"GenerateMac), and the intent body on the wire. See docs/intent-v2.md.",
	}
	for _, in := range intentInputs() {
		generated.Vectors = append(generated.Vectors, generateIntentVector(t, in.name, in.n, nil))
	}
	if !vectors.Updating() {
		if len(doc.Vectors) != len(generated.Vectors) {
			t.Errorf("%s has %d vectors, the generator %d", intentsFile, len(doc.Vectors), len(generated.Vectors))
		}
		for _, v := range doc.Vectors {
			t.Run(v.Name, func(t *testing.T) { checkIntentVector(t, v, nil) })
		}
	}
	vectors.Sync(t, intentsFile, generated)
}

func checkIntentVector(t *testing.T, v intentVector, dict []byte) {
	got := generateIntentVector(t, v.Name, v.Notification, dict)
	for _, f := range []struct{ name, got, want string }{
		{"dedupe_key_preimage", got.DedupeKeyPreimage, v.DedupeKeyPreimage},
		{"dedupe_key", got.DedupeKey, v.DedupeKey},
		{"content_hash_preimage_hex", got.ContentHashPreimageHex, v.ContentHashPreimageHex},
		{"content_hash", got.ContentHash, v.ContentHash},
		{"plaintext", got.Plaintext, v.Plaintext},
		{"plaintext_hex", got.PlaintextHex, v.PlaintextHex},
		{"deflate_hex", got.DeflateHex, v.DeflateHex},
		{"aad_hex", got.AADHex, v.AADHex},
		{"nonce_hex", got.NonceHex, v.NonceHex},
		{"envelope_preimage", got.EnvelopePreimage, v.EnvelopePreimage},
		{"envelope", got.Envelope, v.Envelope},
		{"binding", got.Binding, v.Binding},
		{"intent_mac", got.IntentMAC, v.IntentMAC},
		{"body", got.Body, v.Body},
	} {
		if f.got != f.want {
			t.Errorf("%s:\n got  %s\n want %s", f.name, f.got, f.want)
		}
	}
	if got.SealedContent != v.SealedContent {
		t.Errorf("sealed_content:\n got  %+v\n want %+v", got.SealedContent, v.SealedContent)
	}
	if !maps.Equal(got.EncryptionContext, v.EncryptionContext) || got.GenerateDataKey != v.GenerateDataKey {
		t.Errorf("encryption context or data key: got %v %+v, want %v %+v", got.EncryptionContext, got.GenerateDataKey, v.EncryptionContext, v.GenerateDataKey)
	}

	// The ciphertext is AES-256-GCM of the raw DEFLATE stream of the
	// plaintext under the data key and nonce with the AAD, tag appended, and
	// the stream is deflate_hex (what compress/flate writes; another codec's
	// stream differs and is as valid): checked here with crypto/cipher and
	// compress/flate directly, not through the package.
	var env struct{ CT, Nonce []byte }
	env.CT, _ = base64.StdEncoding.DecodeString(v.SealedContent.CT)
	env.Nonce, _ = base64.StdEncoding.DecodeString(v.SealedContent.Nonce)
	dk, _ := hex.DecodeString(v.GenerateDataKey.PlaintextHex)
	block, _ := aes.NewCipher(dk)
	gcm, _ := cipher.NewGCM(block)
	aad, _ := hex.DecodeString(v.AADHex)
	z, _ := hex.DecodeString(v.DeflateHex)
	if want := gcm.Seal(nil, env.Nonce, z, aad); !bytes.Equal(env.CT, want) || string(aad) != v.DedupeKey {
		t.Errorf("ct is not AES-256-GCM(data key, nonce, deflate_hex, AAD = the dedupe key's ASCII bytes)")
	}
	if pt, err := io.ReadAll(flate.NewReaderDict(bytes.NewReader(z), dict)); err != nil || string(pt) != v.Plaintext {
		t.Errorf("deflate_hex does not inflate to the plaintext (%v)", err)
	}

	// The consumer accepts the body and opens the envelope.
	dec, err := intent.Decode([]byte(v.Body))
	in, sealed := dec.Intent, dec.Sealed
	if err != nil {
		t.Fatalf("intent.Decode(body): %v", err)
	}
	if dec.Version != intent.SchemaVersion || string(dec.Binding) != v.Binding || dec.Seal != v.IntentMAC {
		t.Errorf("decoded body: version %d, binding %q, seal %q; want 3, the vector's binding and intent_mac", dec.Version, dec.Binding, dec.Seal)
	}
	// Sealed is the envelope in the content table's stored form: the
	// vector's sealed_content, field for field.
	wire, _ := json.Marshal(v.SealedContent)
	want, werr := envelope.Parse(wire)
	stored, err := envelope.ParseStored(sealed)
	if err != nil || werr != nil || in.Key() != v.DedupeKey || in.ContentHash != v.ContentHash || !reflect.DeepEqual(stored, want) {
		t.Errorf("decoded body: key %s hash %s sealed %x (%v, %v)", in.Key(), in.ContentHash, sealed, err, werr)
	}
	if in.DestinationRef != v.Notification.DestinationRef || in.SubjectRef != v.Notification.SubjectRef {
		t.Errorf("decoded body: destination_ref %q subject_ref %q, want %q %q", in.DestinationRef, in.SubjectRef,
			v.Notification.DestinationRef, v.Notification.SubjectRef)
	}
	m, err := (&envelope.Opener{KMS: vectorKMS{v: v, key: v.DedupeKey}, KeyARN: v.GenerateDataKey.KeyID, Dictionaries: dictionaries(dict)}).Open(context.Background(), v.DedupeKey, sealed)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if ledger.ContentHash(in.TemplateID, in.TemplateVersion, m) != v.ContentHash {
		t.Errorf("opened message does not match the content hash")
	}
}

// dictionaries is the set holding dict, or none if dict is nil.
func dictionaries(dict []byte) envelope.Dictionaries {
	if dict == nil {
		return nil
	}
	set, _ := envelope.NewDictionaries(dict)
	return set
}

// TestVectorsV2StillDecode: the version 2 vectors (testdata/vectors/v2,
// frozen as version 2 producers wrote them) decode as version 2, with the
// version 2 binding (no envelope line) for the stages that accept them
// while producers migrate, and their envelopes still open.
func TestVectorsV2StillDecode(t *testing.T) {
	var doc intentsDoc
	vectors.Load(t, "v2/"+intentsFile, &doc)
	if len(doc.Vectors) == 0 {
		t.Fatal("no version 2 vectors")
	}
	for _, v := range doc.Vectors {
		dec, err := intent.Decode([]byte(v.Body))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if dec.Version != intent.SchemaVersionV2 || string(dec.Binding) != v.Binding || dec.Seal != v.IntentMAC || dec.Intent.Key() != v.DedupeKey {
			t.Errorf("%s: decoded version %d, binding %q", v.Name, dec.Version, dec.Binding)
		}
		if !strings.HasPrefix(v.Binding, "resetledger-intent-binding/v2\n") || strings.Contains(v.Binding, "\nenvelope:") || v.Envelope != "" {
			t.Errorf("%s: not a version 2 vector", v.Name)
		}
		if _, err := (&envelope.Opener{KMS: vectorKMS{v: v, key: v.DedupeKey}, KeyARN: v.GenerateDataKey.KeyID}).Open(context.Background(), v.DedupeKey, dec.Sealed); err != nil {
			t.Errorf("%s: Open: %v", v.Name, err)
		}
	}
}

// TestVectorsV1StillDecode: the version 1 vectors (testdata/vectors/v1,
// frozen as version 1 producers wrote them) decode as version 1, with
// nothing sealed to verify and no issued_at, for the stages that accept
// them while producers migrate; their envelopes still open.
func TestVectorsV1StillDecode(t *testing.T) {
	var doc intentsDoc
	vectors.Load(t, "v1/"+intentsFile, &doc)
	if len(doc.Vectors) == 0 {
		t.Fatal("no version 1 vectors")
	}
	for _, v := range doc.Vectors {
		dec, err := intent.Decode([]byte(v.Body))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if dec.Version != intent.SchemaVersionV1 || dec.Binding != nil || dec.Seal != "" || !dec.Intent.IssuedAt.IsZero() || dec.Intent.Key() != v.DedupeKey {
			t.Errorf("%s: decoded %+v", v.Name, dec)
		}
		if _, err := (&envelope.Opener{KMS: vectorKMS{v: v, key: v.DedupeKey}, KeyARN: v.GenerateDataKey.KeyID}).Open(context.Background(), v.DedupeKey, dec.Sealed); err != nil {
			t.Errorf("%s: Open: %v", v.Name, err)
		}
	}
}

// TestVectorsEnvelopeV1StillOpen: the intents of testdata/vectors/envelope-v1
// (frozen as producers wrote them before envelope version 2: AES-256-GCM of
// the plaintext itself) still decode, and their envelopes, version 1, still
// open to the plaintext with the recorded content hash.
func TestVectorsEnvelopeV1StillOpen(t *testing.T) {
	var doc intentsDoc
	vectors.Load(t, "envelope-v1/"+intentsFile, &doc)
	if len(doc.Vectors) == 0 {
		t.Fatal("no envelope version 1 vectors")
	}
	for _, v := range doc.Vectors {
		dec, err := intent.Decode([]byte(v.Body))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if v.SealedContent.V != envelope.VersionUncompressed {
			t.Fatalf("%s: a version %d envelope among the frozen version 1 vectors", v.Name, v.SealedContent.V)
		}
		m, err := (&envelope.Opener{KMS: vectorKMS{v: v, key: v.DedupeKey}, KeyARN: v.GenerateDataKey.KeyID}).Open(context.Background(), v.DedupeKey, dec.Sealed)
		if err != nil {
			t.Fatalf("%s: Open: %v", v.Name, err)
		}
		pt, _ := envelope.Plaintext(m)
		if string(pt) != v.Plaintext || ledger.ContentHash(dec.Intent.TemplateID, dec.Intent.TemplateVersion, m) != v.ContentHash {
			t.Errorf("%s: opened to another message", v.Name)
		}
	}
}
