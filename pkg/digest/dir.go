package digest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DirStore is a Store on a local folder laid out as the bucket is
// (<dir>/digests/<seq>.json): a reviewer's offline copy of the digests
// (aws s3 cp --recursive s3://<bucket>/digests <dir>/digests). Put never
// overwrites; the folder has no lock, so keep the copy on write-once media.
type DirStore struct{ Dir string }

var (
	_ Store     = DirStore{}
	_ Anomalies = DirStore{}
)

func (d DirStore) path(seq uint64) string {
	return filepath.Join(d.Dir, filepath.FromSlash(ObjectName(seq)))
}

// Put implements Store.
func (d DirStore) Put(_ context.Context, seq uint64, raw []byte, _ time.Time) error {
	if err := os.MkdirAll(filepath.Dir(d.path(seq)), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(d.path(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("digest %d: %w", seq, ErrExists)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Get implements Store.
func (d DirStore) Get(_ context.Context, seq uint64) ([]byte, error) {
	raw, err := os.ReadFile(d.path(seq))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("digest %d: %w", seq, ErrNotFound)
	}
	return raw, err
}

// Exists implements Store.
func (d DirStore) Exists(_ context.Context, seq uint64) (bool, error) {
	_, err := os.Stat(d.path(seq))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// List implements Store.
func (d DirStore) List(context.Context) ([]uint64, error) {
	ents, err := os.ReadDir(filepath.Join(d.Dir, "digests"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		if n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".json"), 10, 64); err == nil && ObjectName(n) == "digests/"+e.Name() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Foreign implements Anomalies: the names in <dir>/digests that are not
// digest names.
func (d DirStore) Foreign() []string {
	ents, err := os.ReadDir(filepath.Join(d.Dir, "digests"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".json"), 10, 64)
		if err != nil || ObjectName(n) != "digests/"+e.Name() {
			out = append(out, "digests/"+e.Name())
		}
	}
	return out
}

// DeleteMarked implements Anomalies: a folder has no delete markers.
func (DirStore) DeleteMarked() map[uint64]int { return nil }
