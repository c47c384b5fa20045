package ledger

import (
	"context"
	"fmt"
	"time"
)

// AgeBuckets are the upper bounds of the age buckets of Stats; the last
// bucket is open-ended.
var AgeBuckets = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}

// BucketName names the age bucket that holds age.
func BucketName(age time.Duration) string {
	lower := "0"
	for _, b := range AgeBuckets {
		if age < b {
			return lower + "-" + b.String()
		}
		lower = b.String()
	}
	return ">" + lower
}

// StateStats summarizes the open rows of one state.
type StateStats struct {
	Count  int
	Oldest time.Duration // age of the oldest row, by CreatedAt
	ByAge  map[string]int
}

// Stats reports open rows by state and age bucket. Its cost follows the open
// rows (it reads the open-row index), never the table.
func (s *Service) Stats(ctx context.Context) (map[State]StateStats, error) {
	now := s.now()
	out := map[State]StateStats{}
	for _, st := range States {
		if !st.Open() {
			continue
		}
		rows, err := s.Store.ListOpen(ctx, st, time.Time{}, 0)
		if err != nil {
			return nil, fmt.Errorf("stats %s: %w", st, err)
		}
		ss := StateStats{ByAge: map[string]int{}}
		for _, e := range rows {
			age := now.Sub(e.CreatedAt)
			ss.Count++
			ss.ByAge[BucketName(age)]++
			ss.Oldest = max(ss.Oldest, age)
		}
		out[st] = ss
	}
	return out, nil
}
