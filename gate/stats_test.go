package gate

import (
	"math"
	"slices"
	"testing"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns the zero value for no values.
func percentile[T int | time.Duration](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// maxInWindow returns the largest number of times that fall in any window
// [t, t+w) of length w, and where the first such window starts.
func maxInWindow(times []time.Time, w time.Duration) (int, time.Time) {
	s := slices.Clone(times)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	best, at := 0, time.Time{}
	j := 0
	for i := range s {
		// A window starting at s[i] holds s[i..j).
		for j < len(s) && s[j].Before(s[i].Add(w)) {
			j++
		}
		if j-i > best {
			best, at = j-i, s[i]
		}
	}
	return best, at
}

func TestPercentile(t *testing.T) {
	xs := []int{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want int
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}, {10, 1}, {11, 2}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	if got := percentile([]int(nil), 50); got != 0 {
		t.Errorf("p50 of nothing = %d", got)
	}
	if got := percentile([]int{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %d", got)
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		name  string
		times []time.Time
		want  int
		start int
	}{
		{"none", nil, 0, -1},
		{"one", at(500), 1, 500},
		// The window is half-open: 10 s after the first is outside it.
		{"edge excluded", at(0, 10_000), 1, 0},
		{"edge included", at(0, 9_999), 2, 0},
		{"unsorted, bunch later", at(30_000, 0, 25_000, 21_000, 5_000, 29_999), 4, 21_000},
	} {
		got, start := maxInWindow(c.times, 10*time.Second)
		if got != c.want {
			t.Errorf("%s: %d in the fullest window, want %d", c.name, got, c.want)
		}
		if c.start >= 0 && !start.Equal(t0.Add(time.Duration(c.start)*time.Millisecond)) {
			t.Errorf("%s: fullest window starts %s", c.name, start.Sub(t0))
		}
	}
}
