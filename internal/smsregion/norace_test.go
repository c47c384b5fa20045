//go:build !race

package smsregion

const raceEnabled = false
