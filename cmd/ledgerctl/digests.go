package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/kmsdigest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/s3digest"
)

// digestCheck is verify's check against the signed digests: nil when no
// digest bucket was given.
type digestCheck struct {
	chain   *digest.Chain
	fails   int
	pending int
	oldest  time.Duration
}

// loadDigests reads and checks every digest in bucket with the public key
// of keyARN (kms:GetPublicKey) or the one in the PEM or DER file
// publicKey. It runs before the table is read, so a digest written during
// the scan cannot record more than the scan saw.
func (a *app) loadDigests(ctx context.Context, bucket, dir, keyARN, publicKey string, opts digest.Options) (*digestCheck, error) {
	var v digest.Verifier
	var err error
	switch {
	case publicKey != "":
		b, err := os.ReadFile(publicKey)
		if err != nil {
			return nil, &usageError{err: fmt.Errorf("--public-key: %w", err)}
		}
		if v, err = digest.ParsePublicKey(b); err != nil {
			return nil, &usageError{err: fmt.Errorf("--public-key: %w", err)}
		}
	case keyARN != "":
		cfg, err := a.awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		if v, err = kmsdigest.Verifier(ctx, kms.NewFromConfig(cfg), keyARN); err != nil {
			return nil, err
		}
	default:
		return nil, &usageError{err: fmt.Errorf("checking digests needs --digest-key (or DIGEST_KEY_ARN) or --public-key")}
	}
	var store digest.Store = digest.DirStore{Dir: dir}
	if dir == "" {
		cfg, err := a.awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
		store = s3digest.NewFirstVersions(client, bucket)
	}
	c, err := digest.LoadWith(ctx, store, v, opts)
	if err != nil {
		return nil, err
	}
	dc := &digestCheck{chain: c}
	for _, f := range c.Findings {
		dc.report(a, f)
	}
	return dc, nil
}

// row checks e against the digests.
func (dc *digestCheck) row(a *app, e ledger.Entry) {
	for _, f := range dc.chain.CheckRow(e, a.now()) {
		dc.report(a, f)
	}
}

// hashes checks what could be read of a malformed row's history against
// the digests; if nothing could, the row is only kept from being reported
// missing.
func (dc *digestCheck) hashes(a *app, key string, hashes []string) {
	if hashes == nil {
		dc.chain.Skip(key)
		return
	}
	for _, f := range dc.chain.CheckHashes(key, hashes, time.Time{}, a.now()) {
		dc.report(a, f)
	}
}

// report prints f, its code first, and counts it.
func (dc *digestCheck) report(a *app, f digest.Finding) {
	fmt.Fprintln(a.stdout, f.String())
	switch {
	case f.Fail:
		dc.fails++
	case f.Code == digest.CodePending:
		dc.pending++
		dc.oldest = max(dc.oldest, f.Age)
	}
}

// summary is the digest part of verify's last line.
func (dc *digestCheck) summary() string {
	s := fmt.Sprintf("%d digests verify, the newest made %s ago", dc.chain.Digests, dc.newestAge())
	if dc.chain.Digests == 0 {
		s = "no digests yet"
	}
	if dc.pending > 0 {
		s += fmt.Sprintf("; %d rows not yet digested (oldest change %s ago)", dc.pending, dc.oldest.Truncate(time.Second))
	}
	return s
}

func (dc *digestCheck) newestAge() time.Duration {
	return max(0, dc.chain.Opts().Now.Sub(dc.chain.NewestAt)).Truncate(time.Second)
}

// lenientScanner is a.scanner, except that an item that does not decode as
// a ledger row is handed to bad and left out, rather than stopping the
// scan: every other row is still read.
func (a *app) lenientScanner(ctx context.Context, bad func(map[string]types.AttributeValue, error)) (*dynamostore.Scanner, error) {
	db, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	return dynamostore.NewScanner(lenientScan{c: db, bad: bad}, a.table), nil
}

type lenientScan struct {
	c   dynamostore.ScanClient
	bad func(map[string]types.AttributeValue, error)
}

// Scan implements dynamostore.ScanClient.
func (l lenientScan) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := l.c.Scan(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	keep := make([]map[string]types.AttributeValue, 0, len(out.Items))
	for _, it := range out.Items {
		if _, err := dynamostore.DecodeItem(it); err != nil {
			l.bad(it, err)
			continue
		}
		keep = append(keep, it)
	}
	out.Items = keep
	return out, nil
}

// itemKey is an item's dedupe key ("" if it has none).
func itemKey(item map[string]types.AttributeValue) string {
	if v, ok := item[dynamostore.AttrPK].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// itemHashes reads the hashes of an item's history entries as the digest
// function reads them from a stream image (bytes as hex, or text); nil if
// the history cannot be read that far.
func itemHashes(item map[string]types.AttributeValue) []string {
	l, ok := item["history"].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	out := []string{}
	for _, v := range l.Value {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil
		}
		switch h := m.Value["hash"].(type) {
		case *types.AttributeValueMemberB:
			out = append(out, hex.EncodeToString(h.Value))
		case *types.AttributeValueMemberS:
			out = append(out, h.Value)
		default:
			return nil
		}
	}
	return out
}
