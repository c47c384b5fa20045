//go:build race

package surge

// raceDetector reports whether the test binary was built with -race.
const raceDetector = true
