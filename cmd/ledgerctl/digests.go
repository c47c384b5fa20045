package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
func (a *app) loadDigests(ctx context.Context, bucket, dir, keyARN, publicKey string) (*digestCheck, error) {
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
	c, err := digest.Load(ctx, store, v)
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

// report prints f and counts it.
func (dc *digestCheck) report(a *app, f digest.Finding) {
	if !f.Fail {
		dc.pending++
		dc.oldest = max(dc.oldest, f.Age)
		fmt.Fprintf(a.stdout, "PENDING  %s  %s\n", f.Key, f.Detail)
		return
	}
	dc.fails++
	switch {
	case f.Kind == digest.FindDigest:
		fmt.Fprintf(a.stdout, "DIGEST %d  %s\n", f.Seq, f.Detail)
	case f.Key != "":
		fmt.Fprintf(a.stdout, "%s  %s  digest %d: %s\n", kindWord(f.Kind), f.Key, f.Seq, f.Detail)
	default:
		fmt.Fprintf(a.stdout, "%s  digest %d: %s\n", kindWord(f.Kind), f.Seq, f.Detail)
	}
}

func kindWord(k string) string {
	if k == digest.FindGap {
		return "GAP"
	}
	return "ROW"
}

// summary is the digest part of verify's last line.
func (dc *digestCheck) summary() string {
	s := fmt.Sprintf("%d digests verify", dc.chain.Digests)
	if dc.pending > 0 {
		s += fmt.Sprintf("; %d rows not yet digested (oldest change %s ago)", dc.pending, dc.oldest.Truncate(time.Second))
	}
	return s
}
