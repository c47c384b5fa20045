# Reset-notification delivery-claim ledger.
#   make run    local stack on the emulator with a sample intent delivered
#   make test   every test (unit, emulator integration, end to end, a 1,000-intent surge, every benchmark at a tiny size)
#   make surge  10,000 intents in one burst against throttling providers (RELIABILITY.md)
# See README.md.

SHELL      := /bin/bash
FUNCTIONS  := claim dispatch reconcile expire events operate digest
ARCH       ?= $(shell go env GOARCH)
DIST       := dist
GOBUILD    := CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) go build -tags lambda.norpc -trimpath -ldflags='-s -w'
EMULATOR   := localstack/ministack.sh
# Runs a command with the emulator up; afterwards, whatever the outcome, stops by its pid every
# process started meanwhile (the emulator, if it was started here; the webhook provider).
WITH_EMULATOR := localstack/with-emulator.sh
# The last step of the targets that run WITH_EMULATOR --record $(STARTED): fails if a process the
# run recorded in $(STARTED) is still running or its port still served (localstack/leftover_test.go);
# prints nothing if none is.
STARTED        = .run/started-$@
LEFTOVER_CHECK = { LEDGER_STARTED_CHECK=$(CURDIR)/$(STARTED) go test -count=1 -run '^TestNothingLeftRunning$$' ./localstack/ \
	| grep -v '^ok '; test $${PIPESTATUS[0]} -eq 0; }

.PHONY: node_modules all build test unit integration iam-coverage lint-template e2e e2e-test deploy-local run synth deploy bench bench-quick gate simulate surge surge-quiet surge-check emulator-start emulator-stop fuzz clean \
	node-producer node-producer-deps node-producer-emulator python-producer python-producer-deps python-producer-emulator vectors smsregion

all: build

build: $(FUNCTIONS:%=$(DIST)/%/bootstrap)

$(DIST)/%/bootstrap: FORCE
	@mkdir -p $(@D)
	$(GOBUILD) -o $@ ./functions/$*

FORCE:

## test: the template linters, then everything, including end to end on a locally deployed
## stack, against the emulator (started here if nothing listens on $MINISTACK_PORT, default 4566);
## stops what it started (emulator, webhook provider), then checks that nothing of it is left running
test: node_modules node-producer python-producer lint-template
	E2E_REQUIRED=1 $(WITH_EMULATOR) --record $(STARTED) $(MAKE) --no-print-directory deploy-local integration node-producer-emulator python-producer-emulator iam-coverage surge-check bench-quick; \
	status=$$?; $(LEFTOVER_CHECK) || status=1; exit $$status

## unit: tests that need no emulator
unit: node-producer python-producer
	go vet ./...
	go test -race ./...

# One package at a time: the emulator is a single process, and under the load
# of parallel packages it drops responses (the SDK's retries of them are
# handled by the ledger, but they make test timing noisy).
# The handler tests through internal/testkit/pipelinetest, the gate and the end-to-end test record every AWS call
# the functions make into AWSCALLS; iam-coverage then checks them against the
# roles and key policies of the synthesized template (infra/iam_test.go).
# The infra package needs no emulator (it synthesizes the stack and checks the template) and has
# no concurrency to race: it runs beside the others, without -race, and its output is printed
# when both are done.
AWSCALLS := $(CURDIR)/.run/awscalls
integration:
	rm -rf $(AWSCALLS)
	LEDGER_REQUIRE_EMULATOR=1 go vet ./...
	@mkdir -p .run; go test -count=1 ./infra/ > .run/infra-test.out 2>&1 & infra=$$!; \
	LEDGER_REQUIRE_EMULATOR=1 LEDGER_AWSCALL_DIR=$(AWSCALLS) go test -race -count=1 -p 1 $$(go list ./... | grep -v '/infra$$'); \
	status=$$?; wait $$infra; infra_status=$$?; cat .run/infra-test.out; \
	test $$status -eq 0 -a $$infra_status -eq 0

## iam-coverage: every recorded AWS call allowed by its function's role, every grant exercised or justified
iam-coverage:
	LEDGER_IAM_CHECK=1 LEDGER_AWSCALL_DIR=$(AWSCALLS) go test -count=1 -run '^TestIAMCoverage$$' -v ./infra/ | grep -v '^!!'; test $${PIPESTATUS[0]} -eq 0

## bench: cost and speed figures against the emulator and in-process, each beside its target; writes
## BENCHMARKS.md. Fails only if a measurement did not run, never on a figure.
bench: build
	$(WITH_EMULATOR) env BENCH_REPORT=1 BENCH_DIST=$(CURDIR)/$(DIST) ARCH=$(ARCH) go test ./bench -run '^TestReport$$' -count=1 -v -timeout 30m

## bench-quick: every measurement of make bench at a tiny size (seconds; part of make test); writes
## nothing, fails if a measurement did not run or left a figure unmeasured, never on a speed or a ratio
bench-quick: build
	$(WITH_EMULATOR) env BENCH_QUICK=1 BENCH_DIST=$(CURDIR)/$(DIST) ARCH=$(ARCH) go test ./bench -run '^TestReport$$' -count=1 -v -timeout 10m

## run: the whole stack on the local emulator, one sample email delivered; left running (make
## emulator-stop stops it), unless it fails or is interrupted: then it stops what it started
run: node_modules
	localstack/run-local.sh

## e2e: deploy the local stack (emulator started here if needed) and run the end-to-end tests
## (the Go producer's, the Node.js producer's and the Python producer's, and the send limits' proofs:
## email bombing and SMS pumping at E2E_BOMB_INTENTS and E2E_PUMP_SMS, default 200 and 60)
e2e: node_modules node-producer python-producer
	E2E_REQUIRED=1 $(WITH_EMULATOR) --record $(STARTED) $(MAKE) --no-print-directory deploy-local e2e-test; \
	status=$$?; $(LEFTOVER_CHECK) || status=1; exit $$status

deploy-local: node_modules
	localstack/deploy-local.sh

e2e-test:
	go test -count=1 -v -timeout 20m -run 'TestEndToEnd|TestNodeProducer|TestPythonProducer|TestSendLimitsEndToEnd' ./e2e/

## gate: release gate at full size (GATE_INTENTS, default 2000); ends with the accounting table
gate:
	$(WITH_EMULATOR) --record $(STARTED) env GATE_INTENTS=$${GATE_INTENTS:-2000} LEDGER_REQUIRE_EMULATOR=1 go test ./gate -run '^TestGate$$' -count=1 -v -timeout 20m; \
	status=$$?; $(LEFTOVER_CHECK) || status=1; exit $$status

## surge: SURGE_INTENTS intents (default 10,000) published in one burst through the real handlers,
## both providers throttling above the send-rate budget (SURGE_RATE sends/s per channel, default 10);
## fails on a duplicate, a quarantined or unknown row, a row stopped by a send limit (limited=N in the
## summary: one subject and address per intent, limits on; SURGE_LIMITS=off compares their cost), a send
## after its expiry, a provider rate above 1.1 x the budget in a 10 s window, or (here only:
## SURGE_DRAIN_CHECK=1) a drain above 1.25 x the minimum. Intents are production-shaped (8 KB HTML
## email, 160-character SMS, UUID ids; SURGE_SHAPE=small for short ones). Ends with the summary line; the output is kept
## in .run/surge.out and .run/surge-limits-on.out (or -off), where make bench reads its cost table.
SURGE_INTENTS ?= 10000
surge:
	@mkdir -p .run
	set -o pipefail; $(WITH_EMULATOR) --record $(STARTED) env SURGE_INTENTS=$(SURGE_INTENTS) SURGE_DRAIN_CHECK=1 LEDGER_REQUIRE_EMULATOR=1 \
		go test ./gate -run '^TestSurge$$' -count=1 -v -timeout 90m 2>&1 | tee .run/surge.out; \
	status=$$?; cp .run/surge.out .run/surge-limits-$${SURGE_LIMITS:-on}.out; $(LEFTOVER_CHECK) || status=1; \
	grep '^surge: intents=' .run/surge.out | tail -n 1; exit $$status

## surge-quiet: the surge's traffic (SURGE_QUIET_INTENTS, default 2,000) published at a quiet pace
## instead (R intents/s in all, half of each channel's budget; no short-lived challenge): what the
## same traffic costs when nothing waits, the figure make bench sets beside make surge's. Same checks
## except the drain; the output is kept in .run/surge-quiet-limits-on.out (or -off).
surge-quiet:
	@mkdir -p .run
	set -o pipefail; $(WITH_EMULATOR) --record $(STARTED) env SURGE_PACE=quiet SURGE_INTENTS=$${SURGE_QUIET_INTENTS:-2000} LEDGER_REQUIRE_EMULATOR=1 \
		go test ./gate -run '^TestSurge$$' -count=1 -v -timeout 60m 2>&1 | tee .run/surge-quiet.out; \
	status=$$?; cp .run/surge-quiet.out .run/surge-quiet-limits-$${SURGE_LIMITS:-on}.out; $(LEFTOVER_CHECK) || status=1; \
	grep '^surge: intents=' .run/surge-quiet.out | tail -n 1; exit $$status

## surge-check: the surge at 1,000 intents, without -race (part of make test; about a minute);
## asserts every correctness criterion, prints the drain ratio without asserting it (a busy machine
## drains slower with a correct system); prints the summary line, and everything the test printed if it fails,
## then its failures again, last, where a truncated log still shows them
surge-check:
	@mkdir -p .run
	@SURGE_INTENTS=1000 LEDGER_REQUIRE_EMULATOR=1 go test ./gate -run '^TestSurge$$' -count=1 -v -timeout 15m > .run/surge-check.out 2>&1; \
	status=$$?; if [ $$status -ne 0 ]; then cat .run/surge-check.out; \
		echo "surge-check failed on:"; grep -E '^ +surge_test\.go:[0-9]+: ' .run/surge-check.out | head -n 40; fi; \
	grep '^surge: intents=' .run/surge-check.out | tail -n 1; exit $$status

## simulate: deterministic simulation of the protocol, no emulator needed (see RELIABILITY.md): the
## protocol over SIMULATE_SEEDS seeds (default 20000) and how often each path was reached (at least
## 100 times each at 20000 seeds), then each mutant until a seed catches it (SIMULATE_MUTANT_SEEDS,
## default 300, more for the rare ones), split among SIMULATE_JOBS processes; ends with
## "simulate: seeds=S steps=N violations=V mutants_caught=C/M".
## `go test ./sim` (so `make unit` and `make test`) runs a bounded 300 seeds (60 under -race) and
## replays each mutant at its stored seed.
simulate:
	go run ./cmd/simulate -seeds $${SIMULATE_SEEDS:-20000}

## mutate: mutation score of pkg/intentseal, pkg/digest, pkg/ledger, internal/usecase and internal/dynamostore with gremlins
## (pinned in bench/mutate/mutate.sh), which draws its own mutants; each package's own tests judge them.
## Runs on a private copy of HEAD (git archive into a temporary directory), never on the working tree.
## dynamostore's tests need the emulator (started here if nothing listens), about 15 s a mutant: its pass
## runs last. Prints the score and every survivor; logs in .run/mutate. A benchmark, not part of make test;
## about two hours on two cores (MUTATE_PKGS to choose packages, MUTATE_WORKERS to run more at once).
.PHONY: mutate
mutate:
	$(WITH_EMULATOR) bench/mutate/mutate.sh

## fuzz: bounded fuzz runs of the intent decoder and the stream-record decoder
FUZZTIME ?= 10s
fuzz:
	go test ./pkg/intent -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime=$(FUZZTIME)
	go test ./internal/providerevent -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime=$(FUZZTIME)
	go test ./internal/dynamostore -run '^$$' -fuzz '^FuzzClaimedKey$$' -fuzztime=$(FUZZTIME) -parallel=2
	go test ./internal/dynamostore -run '^$$' -fuzz '^FuzzClaimedKeyFields$$' -fuzztime=$(FUZZTIME) -parallel=2
	go test ./internal/smsregion -run '^$$' -fuzz '^FuzzLookupMatchesLibrary$$' -fuzztime=$(FUZZTIME) -parallel=2

emulator-start:
	$(EMULATOR) install
	$(EMULATOR) start

## emulator-stop: stops what make run (or emulator-start, deploy-local) left running: the webhook
## provider on WEBHOOK_PROVIDER_PORT and the emulator on MINISTACK_PORT, each by its recorded pid
emulator-stop:
	localstack/stop-local.sh

synth: build node_modules
	cd infra && npx cdk synth --quiet -c arch=$(if $(filter amd64,$(ARCH)),x86_64,arm64) -c sesFromAddress=no-reply@example.com \
		-c producerArns=arn:aws:iam::111122223333:role/account-service -c operatorArns=arn:aws:iam::111122223333:role/oncall \
		-c dataEventsTrail=resetledger-dev-ledger-writes

## lint-template: cfn-lint (with the cfn-lint-serverless rules) and checkov on the template that
## ships: arm64 functions (built into their own folder), SES email, a non-local stage. Fails on
## any finding; suppressions, each with its reason, are in infra/linters.go.
LINT_DIR   := $(DIST)/lint
LINT_STAGE := prod
lint-template: node_modules
	lint/template.sh install
	$(MAKE) --no-print-directory build ARCH=arm64 DIST=$(LINT_DIR)/arm64
	rm -rf $(LINT_DIR)/cdk.out
	cd infra && npx cdk synth --quiet -o ../$(LINT_DIR)/cdk.out -c stage=$(LINT_STAGE) -c arch=arm64 \
		-c assetDir=../$(LINT_DIR)/arm64 -c sesFromAddress=no-reply@example.com \
		-c alarmTopicArn=arn:aws:sns:us-east-1:111122223333:oncall -c producerArns=arn:aws:iam::111122223333:role/account-service \
		-c operatorArns=arn:aws:iam::111122223333:role/oncall -c dataEventsTrail=resetledger-$(LINT_STAGE)-ledger-writes
	lint/template.sh run $(LINT_DIR)/cdk.out/resetledger-$(LINT_STAGE).template.json

## deploy: builds for arm64 and deploys a stage to AWS with the context in DEPLOY_CONTEXT, which must
## name producerArns, operatorArns and dataEventsTrail (synth fails otherwise), e.g.
## make deploy DEPLOY_CONTEXT='-c stage=prod -c sesFromAddress=... -c alarmTopicArn=... -c producerArns=...
## -c operatorArns=... -c dataEventsTrail=resetledger-prod-ledger-writes' (docs/deploy.md)
deploy: node_modules
	$(MAKE) build ARCH=arm64
	cd infra && npx cdk deploy -c arch=arm64 $(DEPLOY_CONTEXT)

## node-producer: the Node.js producer (producers/node): npm ci from its lockfile, build (dist/),
## unit tests against testdata/vectors; no emulator
NODE_PRODUCER := producers/node
node-producer: node-producer-deps
	cd $(NODE_PRODUCER) && npm test --silent

## node-producer-emulator: its tests against KMS and SQS on the emulator (run by `make test`)
node-producer-emulator: node-producer-deps
	cd $(NODE_PRODUCER) && LEDGER_REQUIRE_EMULATOR=1 npm run --silent test:emulator

node-producer-deps: $(NODE_PRODUCER)/node_modules

# Its dependencies, pinned in its own package-lock.json (apart from the CDK CLI's); the go.mod
# keeps `go ... ./...` out of them, as for the root node_modules below.
$(NODE_PRODUCER)/node_modules: $(NODE_PRODUCER)/package-lock.json
	cd $(NODE_PRODUCER) && npm ci --no-audit --no-fund --loglevel=error
	@printf 'module ignored/producers/node/node_modules\n' > $@/go.mod
	@touch $@

## python-producer: the Python producer (producers/python): its hash-pinned venv, mypy --strict,
## pytest against testdata/vectors; no emulator
PY_PRODUCER      := producers/python
PY_PRODUCER_VENV := .venv/python-producer
PY_PRODUCER_PY   := $(CURDIR)/$(PY_PRODUCER_VENV)/bin/python
python-producer: python-producer-deps
	cd $(PY_PRODUCER) && $(PY_PRODUCER_PY) -m mypy && $(PY_PRODUCER_PY) -m pytest -q -p no:cacheprovider

## python-producer-emulator: its tests against KMS and SQS on the emulator (run by `make test`)
python-producer-emulator: python-producer-deps
	cd $(PY_PRODUCER) && LEDGER_REQUIRE_EMULATOR=1 $(PY_PRODUCER_PY) -m pytest -q -p no:cacheprovider tests/emulator

python-producer-deps: $(PY_PRODUCER_VENV)/.installed

# boto3, cryptography, pytest, mypy and the boto3 stubs with their whole closure, pinned with
# hashes in requirements-dev.txt; the venv is made anew when that file changes.
$(PY_PRODUCER_VENV)/.installed: $(PY_PRODUCER)/requirements-dev.txt
	$${PYTHON:-python3} -m venv --clear $(PY_PRODUCER_VENV)
	$(PY_PRODUCER_PY) -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: -r $<
	@touch $@

## vectors: rewrite testdata/vectors from the Go implementation (after a deliberate change of a
## layout; review the diff), have the Node.js and Python producers rewrite their envelopes of them
## (testdata/vectors/foreign, which the Go opener must open), then check all three against them
vectors: node-producer-deps python-producer-deps
	VECTORS_UPDATE=1 go test -count=1 -run Vectors ./pkg/envelope ./pkg/producer ./cmd/ledgerctl
	cd $(NODE_PRODUCER) && VECTORS_UPDATE=1 npm test --silent >/dev/null
	cd $(PY_PRODUCER) && VECTORS_UPDATE=1 $(PY_PRODUCER_PY) -m pytest -q -p no:cacheprovider tests/unit -k foreign >/dev/null
	go test -count=1 -run Vectors ./pkg/envelope ./pkg/producer ./cmd/ledgerctl
	$(MAKE) --no-print-directory node-producer python-producer

## smsregion: regenerate internal/smsregion's copy of nyaruka/phonenumbers' metadata and its known codes
## (after upgrading the library; review the diff), then check its lookup against the library's
smsregion:
	go generate ./internal/smsregion
	go test -count=1 ./internal/smsregion/...

# The CDK CLI is pinned in package.json/package-lock.json. The go.mod dropped
# into node_modules keeps `go ... ./...` from walking into npm's Go templates.
# node_modules is made when npm's own record of the install is missing or older than the lock
# file: the folder's time says nothing (emptying it makes it new).
node_modules: node_modules/.package-lock.json
node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@printf 'module ignored/node_modules\n' > node_modules/go.mod
	@touch $@

clean:
	rm -rf $(DIST) infra/cdk.out
