//go:build race

package gate

// raceDetector reports whether the test binary was built with -race.
const raceDetector = true
