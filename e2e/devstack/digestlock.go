package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/e2e"
	"github.com/resetledger/resetledger/internal/outputs"
)

// digestLock gives the digest bucket (DigestBucketName) the Object Lock configuration its
// template declares, when the bucket has none: the emulator's CloudFormation creates an
// AWS::S3::Bucket without its ObjectLockConfiguration (ministack 1.5.33 ignores the property),
// and the digest function's PutObject, which sets a COMPLIANCE retention, is refused by a bucket
// without Object Lock. On AWS the template creates the lock and this finds it there. What the
// template declares is checked by infra's TestDigestBucket; this only makes the emulator's bucket
// match it.
func digestLock(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest-lock", flag.ContinueOnError)
	outputsFile := fs.String("outputs", filepath.Join(".run", "outputs.json"), "stack outputs `file`")
	template := fs.String("template", "", "the stack's synthesized template `file` (cdk.out/<stack>.template.json)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *template == "" {
		return errUsage
	}
	out, err := e2e.ReadOutputs(*outputsFile)
	if err != nil {
		return err
	}
	bucket := out.All[outputs.DigestBucket.Name]
	if bucket == "" {
		return fmt.Errorf("%s has no %s output", *outputsFile, outputs.DigestBucket.Name)
	}
	lock, err := declaredLock(*template)
	if err != nil {
		return err
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return err
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	got, err := client.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: &bucket})
	var ae smithy.APIError
	switch {
	case err == nil && got.ObjectLockConfiguration != nil && got.ObjectLockConfiguration.ObjectLockEnabled == s3types.ObjectLockEnabledEnabled:
		fmt.Fprintf(stdout, "digest bucket %s has Object Lock\n", bucket)
		return nil
	case err != nil && !(errors.As(err, &ae) && ae.ErrorCode() == "ObjectLockConfigurationNotFoundError"):
		return fmt.Errorf("read the digest bucket's Object Lock configuration: %w", err)
	}
	if _, err := client.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{
		Bucket: &bucket, ObjectLockConfiguration: lock,
	}); err != nil {
		return fmt.Errorf("put the digest bucket's Object Lock configuration: %w", err)
	}
	fmt.Fprintf(stdout, "digest bucket %s: Object Lock set as the template declares it (COMPLIANCE, %d days)\n",
		bucket, aws.ToInt32(lock.Rule.DefaultRetention.Days))
	return nil
}

// declaredLock reads the one Object Lock configuration the template declares (the digest bucket's).
func declaredLock(template string) (*s3types.ObjectLockConfiguration, error) {
	raw, err := os.ReadFile(template)
	if err != nil {
		return nil, err
	}
	var t struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				ObjectLockConfiguration *struct {
					Rule struct {
						DefaultRetention struct {
							Mode string
							Days int32
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", template, err)
	}
	var found []*s3types.ObjectLockConfiguration
	for _, r := range t.Resources {
		c := r.Properties.ObjectLockConfiguration
		if r.Type != "AWS::S3::Bucket" || c == nil {
			continue
		}
		found = append(found, &s3types.ObjectLockConfiguration{
			ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
			Rule: &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{
				Mode: s3types.ObjectLockRetentionMode(c.Rule.DefaultRetention.Mode), Days: aws.Int32(c.Rule.DefaultRetention.Days),
			}},
		})
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s declares %d buckets with Object Lock, want 1 (the digest bucket)", template, len(found))
	}
	return found[0], nil
}
