package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// exitIncomplete: verify could not read everything it checks (the table or
// the digests); the findings it printed are partial.
const exitIncomplete = 4

var cmdVerify = &command{
	name:     "verify",
	synopsis: "<challenge-id> | --all [--digest-bucket B | --digest-dir DIR] [--digest-key ARN | --public-key FILE] [--stale-after D] [--skew D]",
	summary:  "check the hash chain of a challenge's rows, or of every row, and against the signed digests",
	help: `Checks the hash-chained history of ledger rows: every entry's hash, every
link to its predecessor, the binding to the row's key, and that the history
ends in the row's state. An edited, reordered or removed entry breaks it.
With a challenge id it checks that challenge's rows; with --all it scans the
whole table (cost follows the table).

With --digest-bucket (default DIGEST_BUCKET), or --digest-dir (a copy of
the bucket's digests/ folder), it also checks the rows against the signed
digests (docs/digests.md), trusting neither the table nor its writers:
every digest's signature under the digest key's public key (--digest-key,
default DIGEST_KEY_ARN, read with kms:GetPublicKey; or --public-key, a PEM
or DER file), the numbering, previous-digest hashes and times, that the
newest digest is younger than --stale-after, and for each row every
(entry count, head) a digest recorded. A row the table lacks is judged
against the digests: with --all every row a digest recorded, with a
challenge id that challenge's.

It never stops at the first finding: an item that is not a ledger row is a
finding (malformed-row) and every other row is still checked. Each finding
is one line, its code first (docs/digests.md §7 lists them):

  <code> ROW <key> digest <n>: <detail>     a row against a digest
  <code> ROW <key>: <detail>                a row (broken, malformed-row, pending)
  <code> DIGEST <n>: <detail>               a digest
  <code> OBJECT <name>: <detail>            an object under digests/

Lines that start with a space explain the line above. pending (entries
written after the newest digest that covers the row, within --stale-after)
and removed (a row gone after its retention) do not fail.

Exit status: 0 no failing finding; 1 a failing finding (any code but
pending and removed); 2 usage; 3 the challenge has no row and no digest
records one; 4 the table or the digests could not be read to the end (the
findings printed are partial).`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		all := fs.Bool("all", false, "verify every row of the table")
		bucket := fs.String("digest-bucket", a.getenv(settings.DigestBucket.Env), "the digest bucket: also check against the signed digests")
		keyARN := fs.String("digest-key", a.getenv(settings.DigestKeyARN.Env), "the digest key's ARN (its public key is read with kms:GetPublicKey)")
		publicKey := fs.String("public-key", "", "a PEM or DER file holding the digest key's public key (instead of --digest-key)")
		dir := fs.String("digest-dir", "", "a folder holding a copy of the digests (<dir>/digests/<seq>.json), instead of --digest-bucket")
		interval, intervalErr := digest.DefaultInterval, error(nil)
		if v := a.getenv(settings.DigestInterval.Env); v != "" {
			if interval, intervalErr = time.ParseDuration(v); intervalErr == nil && interval <= 0 {
				intervalErr = errors.New("not positive")
			}
		}
		staleAfter := fs.Duration("stale-after", digest.StaleAfter(interval), "the newest digest older than this is stale, a row pending longer fails: 2 × DIGEST_INTERVAL in whole minutes (at least 1) + 5m")
		skew := fs.Duration("skew", digest.DefaultSkew, "how far ahead of this machine's clock a digest's time may be")
		pos, err := a.parse(c, fs, args, 0, 1)
		if err != nil {
			return err
		}
		if *all == (len(pos) == 1) {
			return usagef(c, "give either a challenge id or --all")
		}
		opts := digest.Options{Now: a.now(), StaleAfter: *staleAfter, Skew: *skew}
		v := &verifier{a: a}
		if *bucket != "" || *dir != "" {
			if intervalErr != nil && !setFlag(fs, "stale-after") {
				return usagef(c, "%s is not a positive duration (%v): give --stale-after", settings.DigestInterval.Env, intervalErr)
			}
			if *staleAfter <= 0 || *skew <= 0 {
				return usagef(c, "--stale-after and --skew must be positive")
			}
			if v.dc, err = a.loadDigests(ctx, *bucket, *dir, *keyARN, *publicKey, opts); err != nil {
				return a.incomplete(err)
			}
		}
		if *all {
			if err := v.all(ctx); err != nil {
				return a.incomplete(err)
			}
		} else if err := v.challenge(ctx, pos[0]); err != nil {
			return err
		}
		return v.verdict()
	},
}

// incomplete marks an error that stopped verify before it read everything
// (explained as other AWS errors are).
func (a *app) incomplete(err error) error {
	var ue *usageError
	var ee *exitError
	if errors.As(err, &ue) || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitIncomplete, err: fmt.Errorf("verification incomplete, the findings above are partial: %w", a.explainAWS(err))}
}

// verifier is one run of verify: its counts and its check against the
// digests (nil without one).
type verifier struct {
	a                              *app
	dc                             *digestCheck
	rows, entries, broken, badRows int
}

// check checks one decoded row: its own chain, then against the digests.
func (v *verifier) check(e ledger.Entry) {
	v.rows++
	v.entries += len(e.History)
	cv := verifyChain(e)
	if !cv.Verified {
		v.broken++
		fmt.Fprintf(v.a.stdout, "broken ROW %s: the hash chain does not verify (challenge %s / %s, state %s)\n  %s\n", e.Key, e.Identity.ChallengeID, e.Identity.Channel, e.State, cv.Error)
		switch i := cv.brokenAt(); {
		case i >= 0 && i < len(e.History):
			printEvent(v.a.stdout, "  ", i, e.History[i], "  <-- first failing entry")
		case i >= len(e.History):
			fmt.Fprintf(v.a.stdout, "  the history has %d entries (row version %d) and ends in %s; entries are missing after [%d]\n", len(e.History), e.Version, e.Last().To, len(e.History)-1)
		}
	}
	if v.dc != nil {
		v.dc.row(v.a, e)
	}
}

// malformed reports a table item that does not decode as a ledger row,
// and checks what can be read of its history against the digests.
func (v *verifier) malformed(item map[string]types.AttributeValue, err error) {
	v.rows++
	v.badRows++
	key := itemKey(item)
	f := digest.Finding{Code: digest.CodeMalformedRow, Kind: digest.FindRow, Key: key, Fail: true,
		Detail: fmt.Sprintf("the item is not a ledger row (%v); every other row is still checked", err)}
	fmt.Fprintln(v.a.stdout, f.String())
	if v.dc != nil && key != "" {
		v.dc.hashes(v.a, key, itemHashes(item))
	}
}

// all checks every item of the table, then every row the digests record
// that the table lacks.
func (v *verifier) all(ctx context.Context) error {
	sc, err := v.a.lenientScanner(ctx, v.malformed)
	if err != nil {
		return err
	}
	if err := sc.All(ctx, dynamostore.ScanFilter{}, func(e ledger.Entry) error { v.check(e); return nil }); err != nil {
		return err
	}
	if v.dc != nil {
		for _, f := range v.dc.chain.Missing(v.a.now()) {
			v.dc.report(v.a, f)
		}
	}
	return nil
}

// challenge checks the rows of challenge id, one per channel. A channel
// without a row is judged against the digests (deleted, or removed after
// its retention); without digests, or if no digest records any, a
// challenge with no row at all exits 3.
func (v *verifier) challenge(ctx context.Context, id string) error {
	if err := (ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: id, Channel: ledger.Email}).Validate(); err != nil {
		return &usageError{err: fmt.Errorf("challenge id %q: %w", id, err)}
	}
	db, err := v.a.db(ctx)
	if err != nil {
		return err
	}
	found, judged := 0, 0
	for _, ch := range ledger.Channels {
		key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: id, Channel: ch}.Key()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &v.a.table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{dynamostore.AttrPK: &types.AttributeValueMemberS{Value: key}}})
		if err != nil {
			return v.a.incomplete(fmt.Errorf("get %s: %w", key, err))
		}
		switch {
		case out.Item != nil:
			found++
			if e, err := dynamostore.DecodeItem(out.Item); err != nil {
				v.malformed(out.Item, err)
			} else {
				v.check(e)
			}
		case v.dc != nil:
			fs := v.dc.chain.CheckAbsent(key, v.a.now())
			if len(fs) > 0 {
				judged++
			}
			for _, f := range fs {
				v.dc.report(v.a, f)
			}
		}
	}
	if found == 0 && judged == 0 {
		what := ""
		if v.dc != nil {
			what = ", and no digest records one"
		}
		return notFound("no ledger rows for challenge %s in table %s (looked for channels %s)%s", id, v.a.table, channelList(), what)
	}
	return nil
}

// verdict is verify's last line and exit status.
func (v *verifier) verdict() error {
	fails := v.broken + v.badRows
	if v.dc != nil {
		fails += v.dc.fails
	}
	if fails > 0 {
		msg := fmt.Sprintf("verification failed: %d failing findings", fails)
		if v.broken > 0 {
			msg += fmt.Sprintf("; %d of %d rows have a broken hash chain", v.broken, v.rows)
		}
		if v.badRows > 0 {
			msg += fmt.Sprintf("; %d items are not ledger rows", v.badRows)
		}
		if v.dc != nil && v.dc.fails > 0 {
			msg += fmt.Sprintf("; %d against the signed digests", v.dc.fails)
		}
		return &exitError{code: exitFailure, err: errors.New(msg)}
	}
	if v.dc != nil {
		fmt.Fprintf(v.a.stdout, "ok: %d rows, %d history entries, every hash chain verifies; %s\n", v.rows, v.entries, v.dc.summary())
		return nil
	}
	fmt.Fprintf(v.a.stdout, "ok: %d rows, %d history entries, every hash chain verifies\n", v.rows, v.entries)
	return nil
}

// setFlag reports whether the flag name was given.
func setFlag(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
