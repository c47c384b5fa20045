// Package handler holds the Lambda handlers of the four functions. Each one
// only translates events into ledger use cases and ledger errors into batch
// responses and logs; functions/<name>/main.go wires one of them. They live
// in one importable package so the pipeline tests can drive all four against
// the emulator.
package handler
