// Package s3digest keeps digests (package digest) in an S3 bucket with
// Object Lock: each digest is one object, digests/<seq>.json, written with
// If-None-Match: * (so none is ever overwritten and two writers cannot take
// one number) and locked in COMPLIANCE mode until its retain-until date
// (so no one in the account, root included, can delete or change it).
package s3digest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/pkg/digest"
)

// Client is the part of the S3 client the store calls. The digest
// function calls PutObject, GetObject and HeadObject: it needs
// s3:PutObject, s3:PutObjectRetention, s3:GetObject, and s3:ListBucket on
// the bucket, without which S3 answers a HeadObject of a missing key with
// 403 instead of 404 (and the writer could not find the newest digest).
// ledgerctl verify calls GetObject and ListObjectsV2 (s3:GetObject,
// s3:ListBucket).
type Client interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// Store is a digest.Store on an S3 bucket that has Object Lock enabled.
type Store struct {
	client Client
	bucket string
}

var _ digest.Store = (*Store)(nil)

// New returns a Store on bucket.
func New(client Client, bucket string) *Store { return &Store{client: client, bucket: bucket} }

const prefix = "digests/"

// Put implements digest.Store: a conditional PutObject, locked in
// COMPLIANCE mode until retainUntil.
func (s *Store) Put(ctx context.Context, seq uint64, raw []byte, retainUntil time.Time) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String(digest.ObjectName(seq)), Body: bytes.NewReader(raw),
		ContentType:               aws.String("application/json"),
		IfNoneMatch:               aws.String("*"),
		ObjectLockMode:            types.ObjectLockModeCompliance,
		ObjectLockRetainUntilDate: aws.Time(retainUntil.UTC().Truncate(time.Second).Add(time.Second)),
		ChecksumAlgorithm:         types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
			return fmt.Errorf("digest %d: %w", seq, digest.ErrExists)
		}
		return fmt.Errorf("s3digest: put digest %d: %w", seq, err)
	}
	return nil
}

// Get implements digest.Store.
func (s *Store) Get(ctx context.Context, seq uint64) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(digest.ObjectName(seq))})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("digest %d: %w", seq, digest.ErrNotFound)
		}
		return nil, fmt.Errorf("s3digest: get digest %d: %w", seq, err)
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, 64<<20))
}

// Exists implements digest.Store.
func (s *Store) Exists(ctx context.Context, seq uint64) (bool, error) {
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(digest.ObjectName(seq))})
	if err != nil {
		if notFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("s3digest: head digest %d: %w", seq, err)
	}
	return true, nil
}

// List implements digest.Store. Names that are not digest names are
// skipped (the bucket holds nothing else).
func (s *Store) List(ctx context.Context) ([]uint64, error) {
	var out []uint64
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3digest: list: %w", err)
		}
		for _, o := range page.Contents {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(o.Key), prefix), ".json")
			if n, err := strconv.ParseUint(name, 10, 64); err == nil && digest.ObjectName(n) == aws.ToString(o.Key) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")
}
