// Package handler holds the Lambda handlers of the functions: the five the
// pipeline's events drive, and the operator function's (Operate), which an
// operator reaches through its function URL. Each one only translates events
// into ledger use cases and ledger errors into batch (or HTTP) responses and
// logs; functions/<name>/main.go wires one of them. They live
// in one importable package so the pipeline tests can drive all four against
// the emulator.
package handler
