// Package bench measures what the ledger costs and how fast it is: DynamoDB
// requests and write capacity per message (counted with SDK middleware and
// computed from DynamoDB's item-size rules), sweep scaling, claim throughput
// against an emulator, in-process handler cost, and each function's
// bootstrap size and cold start.
//
// The measurements report every figure beside its target; they never fail
// a build on a number. Plain `go test ./bench` runs only the fast unit tests
// of the helpers here. The full report runs with BENCH_REPORT=1 (`make
// bench`) and writes BENCHMARKS.md:
//
//	BENCH_REPORT=1 go test ./bench -run '^TestReport$' -count=1 -v -timeout 30m
//
// With BENCH_QUICK=1 (`make bench-quick`, part of `make test`) the same
// measurements run at a tiny size in seconds and write nothing; the run
// fails if a measurement did not run or left a figure unmeasured, so that a
// broken benchmark fails CI.
package bench
