package sim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/intentseal"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// KMS that fails (ClassKMS). In one world in two, the claim function checks
// each intent's seal as it does when deployed (internal/handler's
// checkSeal: a seal that does not verify dead-letters the intent with
// reason intent_mac, any other error retries it) with the real
// kmsseal.KMS, and dispatch and reconcile open the sealed content with the
// real envelope.Opener, both against kmsDouble: a KMS that answers VerifyMac
// and Decrypt as AWS KMS does (a real HMAC-SHA-256 under the intent key, a
// data key bound to its encryption context) and, at any call of the fault
// phase, fails in one of the ways KMS fails (kmsFaults). Some intents
// arrive as tampered copies: a genuine intent's seal and envelope with its
// destination_ref changed, which KMS answers with KMSInvalidMacException.
//
// The invariant (invSealChecked) is judged from the double's own record of
// what it answered, not from the claim's account: a claim writes a row (or
// anything to one) only if KMS answered its intent's seal valid in that
// invocation; an intent is dead-lettered for its seal only if KMS answered
// it an invalid MAC (any other failure is retried and the intent kept);
// and a transport call is made only by an invocation whose Decrypt of that
// row's data key succeeded (the opener's failures never send).

// invSealChecked is the name of a violation of the KMS rules above.
const invSealChecked = "kms-error-not-verified"

// kmsKeyARN is the simulated KMS key (the intent key and the content key
// are one here: the double does not mix their operations up).
const kmsKeyARN = "arn:aws:kms:eu-west-1:111122223333:key/5151f00d-0000-4000-8000-000000000046"

// kmsMacKey is the intent key's HMAC material inside the double.
var kmsMacKey = sha256.Sum256([]byte("resetledger simulator intent key"))

// kmsFault is one way a KMS call fails.
type kmsFault struct {
	name string
	err  func(op string) error
}

// kmsFaults are the ways a KMS call fails that say nothing about the seal
// or the ciphertext: throttling, access denied, the key disabled, pending
// deletion or gone, a KMS internal error, a dependency timeout, the call's
// own context ending, and an answer made under another key.
var kmsFaults = []kmsFault{
	{"throttled", func(string) error {
		return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
	}},
	{"access denied", func(string) error {
		return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform kms operation", Fault: smithy.FaultClient}
	}},
	{"key disabled", func(string) error { return &types.DisabledException{Message: aws.String("key is disabled")} }},
	{"key pending deletion", func(string) error {
		return &types.KMSInvalidStateException{Message: aws.String("key is pending deletion")}
	}},
	{"key not found", func(string) error { return &types.NotFoundException{Message: aws.String("key does not exist")} }},
	{"key unavailable", func(string) error {
		return &types.KeyUnavailableException{Message: aws.String("key material unavailable")}
	}},
	{"internal error", func(string) error { return &types.KMSInternalException{Message: aws.String("internal error")} }},
	{"dependency timeout", func(string) error { return &types.DependencyTimeoutException{Message: aws.String("timed out")} }},
	{"context deadline", func(op string) error {
		return &smithy.OperationError{ServiceID: "KMS", OperationName: op, Err: context.DeadlineExceeded}
	}},
	{"answer for another key", nil}, // answered, for another key: kmsseal and the opener must not take it
}

// kmsVerdict is what the double answered an invocation's last VerifyMac.
type kmsVerdict string

const (
	verdictNone    kmsVerdict = ""
	verdictValid   kmsVerdict = "valid"
	verdictInvalid kmsVerdict = "invalid MAC"
)

// kmsPort is KMS as one invocation calls it.
type kmsPort struct {
	inv *invocation
	key string // the row the call is about, for the trace
}

var _ kmsseal.Client = kmsPort{}
var _ envelope.Decrypter = kmsPort{}

// fault parks the call and returns the failure the scheduler drew for it
// among the first n of kmsFaults, if any (name "" when it answers).
func (p kmsPort) fault(op string, n int) kmsFault {
	r := p.inv.yield(&call{op: opKMS, key: p.key, detail: op})
	if r.fault != failCall {
		return kmsFault{}
	}
	s := p.inv.sim
	f := kmsFaults[s.c.pick(n, "kms fault")]
	s.stats.Faults["kms "+f.name]++
	s.note(p.inv, "kms failed", p.key, op+": "+f.name)
	return f
}

// GenerateMac is never called by the claim function (its key policy
// allows VerifyMac only).
func (p kmsPort) GenerateMac(context.Context, *kms.GenerateMacInput, ...func(*kms.Options)) (*kms.GenerateMacOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "claim may not generate MACs"}
}

// VerifyMac answers as KMS does, or fails as the scheduler drew.
func (p kmsPort) VerifyMac(_ context.Context, in *kms.VerifyMacInput, _ ...func(*kms.Options)) (*kms.VerifyMacOutput, error) {
	inv := p.inv
	f := p.fault("VerifyMac", len(kmsFaults))
	switch {
	case f.name != "" && f.err == nil:
		inv.verdict = kmsVerdict("answer for another key")
		return &kms.VerifyMacOutput{MacValid: true, KeyId: aws.String(otherKeyARN), MacAlgorithm: in.MacAlgorithm}, nil
	case f.name != "":
		inv.verdict = kmsVerdict(f.name)
		return nil, f.err("VerifyMac")
	case aws.ToString(in.KeyId) != kmsKeyARN:
		inv.verdict = "key not found"
		return nil, &types.NotFoundException{Message: aws.String("key does not exist")}
	}
	h := hmac.New(sha256.New, kmsMacKey[:])
	h.Write(in.Message)
	if !hmac.Equal(h.Sum(nil), in.Mac) {
		inv.verdict = verdictInvalid
		return nil, &types.KMSInvalidMacException{Message: aws.String("invalid MAC")}
	}
	inv.verdict = verdictValid
	return &kms.VerifyMacOutput{MacValid: true, KeyId: aws.String(kmsKeyARN), MacAlgorithm: in.MacAlgorithm}, nil
}

// otherKeyARN is a key KMS may wrongly answer for.
const otherKeyARN = "arn:aws:kms:eu-west-1:111122223333:key/0000dead-0000-4000-8000-000000000000"

// Decrypt answers as KMS does (the data key of a blob the double made, for
// the encryption context it was made with), or fails as the scheduler
// drew. It records, per row, whether the invocation's last Decrypt of its
// data key succeeded.
func (p kmsPort) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	inv := p.inv
	row := in.EncryptionContext["dedupe_key"]
	inv.opened[row] = false
	// The opener pins its key (KeyId), so KMS never answers a Decrypt for
	// another key: every other failure.
	if f := p.fault("Decrypt", len(kmsFaults)-1); f.name != "" {
		return nil, f.err("Decrypt")
	}
	dk, ok := inv.sim.dataKeys[string(in.CiphertextBlob)]
	if !ok || aws.ToString(in.KeyId) != kmsKeyARN || !maps.Equal(dk.context, in.EncryptionContext) {
		return nil, &types.InvalidCiphertextException{Message: aws.String("ciphertext or context does not match")}
	}
	inv.opened[row] = true
	return &kms.DecryptOutput{Plaintext: bytes.Clone(dk.plain), KeyId: aws.String(kmsKeyARN), EncryptionAlgorithm: types.EncryptionAlgorithmSpecSymmetricDefault}, nil
}

// dataKey is one data key the double generated.
type dataKey struct {
	plain   []byte
	context map[string]string
}

// kmsSealer generates data keys for the producer's side (newSim seals the
// world's messages before the run; no invocation, no fault).
type kmsSealer struct{ s *sim }

func (k kmsSealer) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	n := len(k.s.dataKeys) + 1
	plain := sha256.Sum256(fmt.Appendf(nil, "data key %d", n))
	blob := fmt.Sprintf("sim-edk-%06d", n)
	k.s.dataKeys[blob] = dataKey{plain: plain[:], context: maps.Clone(in.EncryptionContext)}
	return &kms.GenerateDataKeyOutput{Plaintext: bytes.Clone(plain[:]), CiphertextBlob: []byte(blob), KeyId: aws.String(kmsKeyARN)}, nil
}

// sealMessages seals every message of a KMS world as a producer does: its
// content in an envelope under a fresh data key (stored as the content
// table stores it) and, unless it is a version-1 intent, its binding under
// the intent key. A tampered copy carries its original's seal and
// envelope.
func (s *sim) sealMessages() {
	if !s.w.kms {
		return
	}
	ctx := context.Background()
	sealer := &envelope.Sealer{KMS: kmsSealer{s}, KeyID: kmsKeyARN}
	// Every other message is sealed against the stage's dictionary
	// (envelope version 3), chosen by position, not drawn: the runs take
	// the same steps either way.
	withDict := &envelope.Sealer{KMS: kmsSealer{s}, KeyID: kmsKeyARN, Dictionary: simDictionary}
	signer := &intentseal.Local{Key: kmsMacKey[:]}
	type sealedAs struct {
		stored []byte
		seal   string
	}
	done := map[*message]sealedAs{}
	for i, m := range s.w.messages {
		if m.of != nil {
			m.sealed, m.seal = done[m.of].stored, done[m.of].seal
			continue
		}
		msg, err := ledgertest.PlainOpener{}.Open(ctx, m.intent.Key(), m.sealed)
		if err != nil {
			panic("sim: " + err.Error())
		}
		sl := sealer
		if i%2 == 1 {
			sl = withDict
		}
		env := must(sl.Seal(ctx, m.intent.Key(), msg))
		stored := must(env.MarshalStored())
		seal := ""
		if !m.intent.IssuedAt.IsZero() {
			seal = must(signer.Sign(ctx, must(intent.Binding(m.intent, env))))
		}
		m.sealed, m.seal = stored, seal
		done[m] = sealedAs{stored, seal}
	}
}

// errSealRefused is a claim's refusal of an intent whose seal KMS answered
// invalid: dead-lettered with reason intent_mac, as the claim handler does.
var errSealRefused = errors.New("intent_mac is not the seal of this intent (changed after sealing, or sealed with another key)")

// checkSeal checks the seal of the invocation's intent as the claim handler
// does before any row exists: nil to claim, errSealRefused to dead-letter,
// any other error to retry. A version-1 intent seals nothing but its
// content: a stage that accepts it (ACCEPT_INTENT_V1) claims it unchecked.
func (s *sim) checkSeal(ctx context.Context, inv *invocation) error {
	m := inv.trig.msg
	if m.seal == "" {
		return nil
	}
	var v intentseal.Verifier = &kmsseal.KMS{Client: kmsPort{inv: inv, key: m.intent.Key()}, KeyARN: kmsKeyARN}
	if s.mutant == KMSErrorAsValid {
		v = anyAnswerValid{v}
	}
	env, err := envelope.ParseStored(m.sealed)
	if err != nil {
		return fmt.Errorf("%w: %v", errSealRefused, err)
	}
	binding, err := intent.Binding(m.intent, env)
	if err != nil {
		return fmt.Errorf("%w: %v", errSealRefused, err)
	}
	err = v.Verify(ctx, binding, m.seal)
	switch {
	case errors.Is(err, intentseal.ErrMismatch):
		return errSealRefused
	case err != nil:
		return fmt.Errorf("intent seal not checked; will retry: %w", err)
	}
	return nil
}

// anyAnswerValid is mutant KMSErrorAsValid's verifier: a KMS error other
// than an invalid MAC is taken as a valid MAC.
type anyAnswerValid struct{ v intentseal.Verifier }

func (a anyAnswerValid) Verify(ctx context.Context, binding []byte, seal string) error {
	if err := a.v.Verify(ctx, binding, seal); errors.Is(err, intentseal.ErrMismatch) {
		return err
	}
	return nil
}

// sealRefused handles a claim that dead-lettered its intent for its seal:
// only an invalid MAC may do that.
func (s *sim) sealRefused(inv *invocation, err error) bool {
	if inv.fn != fnClaim || !errors.Is(err, errSealRefused) {
		return false
	}
	m := inv.trig.msg
	s.consumed[m.id] = true
	s.note(inv, "intent dead-lettered", m.intent.Key(), m.label+" "+m.kind+": intent_mac")
	if inv.verdict != verdictInvalid {
		s.fail(invSealChecked, fmt.Sprintf("%s dead-lettered intent %s (%s) for its seal, and KMS answered its VerifyMac %q, not an invalid MAC: a KMS failure dropped the intent",
			inv, m.label, m.kind, inv.verdictOr()), m.intent.Key())
		return true
	}
	if m.of == nil {
		s.fail(invSealChecked, fmt.Sprintf("%s dead-lettered the genuine intent %s (%s): its seal is the producer's", inv, m.label, m.kind), m.intent.Key())
		return true
	}
	s.stats.Paths[pathTamperedRefused]++
	return true
}

// checkSealed judges a write of a claim in a KMS world: the claim checked a
// seal, and KMS answered it valid.
func (s *sim) checkSealed(w writeFact) {
	inv := w.inv
	if !s.w.kms || inv.fn != fnClaim || inv.trig.msg.seal == "" {
		return
	}
	m := inv.trig.msg
	if inv.verdict != verdictValid || m.of != nil {
		s.fail(invSealChecked, fmt.Sprintf("%s wrote row %s for intent %s (%s) whose seal KMS answered %q in this invocation, not valid",
			inv, s.label(w.after.Key), m.label, m.kind, inv.verdictOr()), w.after.Key)
		return
	}
	if s.sealRetried[m.id] {
		s.stats.Paths[pathSealRetried]++
	}
}

// checkOpened judges a transport call in a KMS world: the calling
// invocation's last Decrypt of the row's data key succeeded.
func (s *sim) checkOpened(f sendFact) {
	if !s.w.kms || f.inv.opened[f.key] {
		return
	}
	s.fail(invSealChecked, fmt.Sprintf("%s called the transport for %s attempt %d though its last Decrypt of the row's data key failed, or it made none",
		f.inv, s.label(f.key), f.attempt), f.key)
}

func (inv *invocation) verdictOr() string {
	if inv.verdict == verdictNone {
		return "nothing (no VerifyMac)"
	}
	return string(inv.verdict)
}

// tamperedDestination is the destination_ref of a tampered copy.
func tamperedDestination(chn ledger.Channel) string { return "acct-attacker:" + string(chn) }

// drawKMS draws a KMS world (ClassKMS): one world in two, with a tampered
// copy of some intents arriving beside them.
func (w *world) drawKMS(c chooser) {
	if !w.on(ClassKMS) || !c.coin(1, "kms world") {
		return
	}
	w.kms = true
	for _, m := range w.messages {
		if m.kind != "original" || m.intent.IssuedAt.IsZero() || !c.coin(1, "tampered copy") {
			continue
		}
		in := m.intent
		in.DestinationRef = tamperedDestination(in.Identity.Channel)
		at := max(0, m.at+tamperDelays[c.pick(len(tamperDelays), "tampered copy at")])
		w.add(&message{intent: in, sealed: m.sealed, label: m.label, kind: "tampered copy", at: at, of: m})
	}
}

// tamperDelays are when a tampered copy arrives, after its original.
var tamperDelays = []time.Duration{-time.Second, 0, 30 * time.Second}

// simDictionary is the stage's one preset dictionary in the KMS world: the
// canonical plaintext of a message as ledgertest renders it.
var simDictionary = must(envelope.Plaintext(ledgertest.Message(0, ledger.Email)))

// simDictionaries is the set dispatch and reconcile open with.
var simDictionaries = must(envelope.NewDictionaries(simDictionary))
