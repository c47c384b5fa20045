//go:build race

package smsregion

// raceEnabled shrinks the library comparisons under the race detector, which
// slows the library's regular expressions several times over.
const raceEnabled = true
