// Package bench measures what the ledger costs and how fast it is: DynamoDB
// requests and write capacity per message (counted with SDK middleware and
// computed from DynamoDB's item-size rules), sweep scaling, claim throughput
// against an emulator, in-process handler cost and cold-start proxies.
//
// The measurements report; they never fail a build on a number. Plain
// `go test ./bench` runs only the fast unit tests of the helpers here. The
// full report runs with BENCH_REPORT=1 (`make bench`) and writes
// BENCHMARKS.md:
//
//	BENCH_REPORT=1 go test ./bench -run '^TestReport$' -count=1 -v -timeout 30m
package bench
