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
	"slices"
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
	// first, for a verifier: each digest's first version, and how many
	// versions were written over it (NewFirstVersions).
	versions VersionClient
	first    map[uint64]string
	over     map[uint64]int
	// marked and foreign, for a verifier: delete markers over digests, and
	// names under digests/ that are not digest names (NewFirstVersions).
	marked  map[uint64]int
	foreign []string
}

var _ digest.Store = (*Store)(nil)

// New returns a Store on bucket.
func New(client Client, bucket string) *Store { return &Store{client: client, bucket: bucket} }

// VersionClient lists object versions (s3:ListBucketVersions).
type VersionClient interface {
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// NewFirstVersions returns a Store for a verifier: List lists every
// version, Get reads each digest's first version (the one its writer
// locked; s3:GetObjectVersion), and Overwritten reports the digests that
// someone wrote a later version over. Object Lock keeps versions, not
// names: a PutObject without If-None-Match makes a new current version
// over a locked digest, which a verifier reading current versions would
// take for the digest.
func NewFirstVersions(client interface {
	Client
	VersionClient
}, bucket string) *Store {
	return &Store{client: client, bucket: bucket, versions: client}
}

// Overwritten implements digest.Overwrites: for each digest with versions
// written after its first, how many (after List).
func (s *Store) Overwritten() map[uint64]int { return s.over }

// DeleteMarked implements digest.Anomalies: for each digest with delete
// markers among its versions, how many (after List of a NewFirstVersions
// store).
func (s *Store) DeleteMarked() map[uint64]int { return s.marked }

// Foreign implements digest.Anomalies: the names under digests/ that are
// not digest names (after List of a NewFirstVersions store).
func (s *Store) Foreign() []string { return s.foreign }

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
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(digest.ObjectName(seq))}
	if v, ok := s.first[seq]; ok && v != "" && v != "null" {
		in.VersionId = aws.String(v)
	}
	out, err := s.client.GetObject(ctx, in)
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
	if s.versions != nil {
		return s.listVersions(ctx)
	}
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

// listVersions lists every version of every digest name, keeping the
// first version of each: the oldest LastModified and, of versions as old,
// the one listed last (S3 lists a name's versions newest first). Delete
// markers are counted, never taken for a version; a name that is not a
// digest name is noted as foreign.
func (s *Store) listVersions(ctx context.Context) ([]uint64, error) {
	type v struct {
		id string
		at time.Time
	}
	all := map[uint64][]v{}
	s.marked, s.foreign = map[uint64]int{}, nil
	foreign := map[string]bool{}
	name := func(key string) (uint64, bool) {
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(key, prefix), ".json"), 10, 64)
		if err != nil || digest.ObjectName(n) != key {
			if !foreign[key] {
				foreign[key] = true
				s.foreign = append(s.foreign, key)
			}
			return 0, false
		}
		return n, true
	}
	in := &s3.ListObjectVersionsInput{Bucket: &s.bucket, Prefix: aws.String(prefix)}
	for {
		page, err := s.versions.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("s3digest: list versions: %w", err)
		}
		for _, o := range page.Versions {
			if n, ok := name(aws.ToString(o.Key)); ok {
				all[n] = append(all[n], v{id: aws.ToString(o.VersionId), at: aws.ToTime(o.LastModified)})
			}
		}
		for _, o := range page.DeleteMarkers {
			if n, ok := name(aws.ToString(o.Key)); ok {
				s.marked[n]++
			}
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
	slices.Sort(s.foreign)
	s.first, s.over = map[uint64]string{}, map[uint64]int{}
	out := make([]uint64, 0, len(all))
	for n, vs := range all {
		first := vs[0]
		for _, x := range vs[1:] {
			if !x.at.After(first.at) {
				first = x
			}
		}
		s.first[n] = first.id
		if len(vs) > 1 {
			s.over[n] = len(vs) - 1
		}
		out = append(out, n)
	}
	slices.Sort(out)
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
