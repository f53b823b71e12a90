# Switchboard's build, tests and lint. `make check` is the one test command: set-up of what
# is missing (.ci/setup), unit tests, then integration tests against a real Apache Kafka
# (deploy/kafka/kafka.sh starts one unless KAFKA_BOOTSTRAP names a running cluster).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
KAFKA_SH := deploy/kafka/kafka.sh
KAFKA_PORT ?= 9092
export KAFKA_PORT
# The integration run takes -run from INTEGRATION_RUN when it is set (e.g. 'Kafka|Conformance').
INTEGRATION_RUN ?=
# The chaos test (three routers, kill -9, a broker restart; about 5 minutes) and
# TestRoutersAnswerAfterBrokerRestarts (two broker restarts, about a minute; ROUTER_RESTARTS=N
# for more) are part of the integration run; SWITCHBOARD_CHAOS=0 leaves them out.
SWITCHBOARD_CHAOS ?= 1
export SWITCHBOARD_CHAOS
GOLANGCI_LINT_VERSION := v2.15.0
# The integration run is verbose so that CI logs name every test and show the chaos and
# black-box counts; this keeps the lines worth reading (results, failures, counts).
INTEGRATION_FILTER := grep --line-buffered -E '^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL|PASS|panic)|^\s+\S+_test\.go:[0-9]+:|^test-integration:|chaos:|blackbox:|stall:|dlq:|progress:|drill:'
GOLANGCI_LINT ?= $(or $(shell command -v golangci-lint 2>/dev/null),$(shell $(GO) env GOPATH)/bin/golangci-lint)
# promtool (Debian's prometheus package) checks and unit-tests the alert rules.
PROMTOOL ?= $(shell command -v promtool 2>/dev/null)

.PHONY: all build dev setup test test-integration chaos chaos-at-least-once check kafka-up kafka-down kafka-status lint lint-tools bench rules-test peer-bench mcp-check mcp-kafka-check examples-check secure-check drill

all: build

build:
	$(GO) build -o bin/switchboard ./cmd/switchboard

# The README's first command. `go run` prints nothing while it compiles (the first build,
# librdkafka's Go client included, takes about a minute), so this says so first.
# DEV_FLAGS are passed on: make dev DEV_FLAGS='--agents echo'.
DEV_FLAGS ?=
dev:
	@echo "dev: building bin/switchboard (the first build takes a minute or more; later ones a few seconds)..."
	@$(GO) build -o bin/switchboard ./cmd/switchboard
	bin/switchboard dev $(DEV_FLAGS)

# What make check needs on a Debian machine, installed only where missing (.ci/setup says
# in one line what it installs; apt-get runs under sudo when not root).
setup:
	.ci/setup

test:
	$(GO) test -race -shuffle=on -count=1 ./...
	cd deploy/bench/tracesched && $(GO) vet ./... && $(GO) test -count=1 ./...

# Uses the cluster in KAFKA_BOOTSTRAP if set. Otherwise starts the local broker (unless one
# is already running on KAFKA_PORT, which it then leaves running), runs the tests and stops
# the broker it started whatever the tests did; the exit code is the tests'.
#
# Every test runs under -race but those in UNRACED_INTEGRATION, which run every Switchboard they
# test as processes of their own (built without -race): the detector would watch only their
# client, which it slowed 2.4 times (the lookup test's 100,000 intents and 500,000 lookups took
# 274 s of CI under -race). They run in a second go test, unless INTEGRATION_RUN picks tests.
UNRACED_INTEGRATION := ^TestAnyInstanceAnswersForAnyIntentApacheKafka$$
test-integration:
	@run() { \
		local rc=0 race=( $(GO) test -v -race -count=1 -timeout 25m -tags integration -p 1 ) \
			unraced=( $(GO) test -v -count=1 -timeout 15m -tags integration -run '$(UNRACED_INTEGRATION)' ./cmd/switchboard ); \
		if [[ -n '$(INTEGRATION_RUN)' ]]; then \
			echo "test-integration: $${race[*]} -run '$(INTEGRATION_RUN)' ./..."; "$${race[@]}" -run '$(INTEGRATION_RUN)' ./... || rc=$$?; \
			return $$rc; \
		fi; \
		echo "test-integration: $${race[*]} -skip '$(UNRACED_INTEGRATION)' ./..."; \
		"$${race[@]}" -skip '$(UNRACED_INTEGRATION)' ./... || rc=$$?; \
		echo "test-integration: $${unraced[*]}"; "$${unraced[@]}" || rc=$$?; \
		return $$rc; \
	}; \
	if [[ -n $${KAFKA_BOOTSTRAP:-} ]]; then \
		echo "test-integration: against KAFKA_BOOTSTRAP=$$KAFKA_BOOTSTRAP"; \
		run 2>&1 | $(INTEGRATION_FILTER); exit; \
	fi; \
	rc=0; $(KAFKA_SH) status 2>/dev/null || rc=$$?; \
	if [[ $$rc == 3 ]]; then \
		trap '$(KAFKA_SH) down' EXIT; \
		trap 'exit 130' INT TERM; \
	else \
		echo "test-integration: a broker is already running on port $(KAFKA_PORT); leaving it running"; \
	fi; \
	$(KAFKA_SH) up >/dev/null; \
	export KAFKA_BOOTSTRAP=127.0.0.1:$(KAFKA_PORT); \
	echo "test-integration: KAFKA_BOOTSTRAP=$$KAFKA_BOOTSTRAP"; \
	run 2>&1 | $(INTEGRATION_FILTER)

check: setup test rules-test test-integration mcp-check examples-check

# The Prometheus config and alert rules (deploy/prometheus): promtool check, then the rules'
# unit tests. Without promtool it says so and passes, except in CI (CI set), where it fails:
# .ci/run installs it.
rules-test:
	@if [[ -z "$(PROMTOOL)" ]]; then \
		if [[ -n "$${CI:-}" ]]; then echo "rules-test: promtool not found (CI installs Debian's prometheus package)"; exit 1; fi; \
		echo "rules-test: SKIPPED: promtool not found (apt-get install prometheus provides it)"; exit 0; \
	fi; \
	"$(PROMTOOL)" check config deploy/prometheus/prometheus.yml; \
	"$(PROMTOOL)" check rules deploy/prometheus/alerts.yml; \
	"$(PROMTOOL)" test rules deploy/prometheus/alerts_test.yml

# Real MCP clients against 'switchboard dev' (deploy/mcp): the conformance suite, the
# Python and the TypeScript SDKs, installed pinned by deploy/mcp/install.sh.
mcp-check: build
	deploy/mcp/check.sh

# Only the MCP SDKs' task failover on Apache Kafka (TestMCPClientsTaskFailoverOnKafka, part
# of test-integration: the Python and TypeScript SDKs create a task, its instance is killed
# with kill -9, they read the result from another), against the broker test-integration
# would use; the clients are deploy/mcp/install.sh's (make setup).
mcp-kafka-check:
	$(MAKE) test-integration INTEGRATION_RUN=TestMCPClientsTaskFailoverOnKafka

# The example agents and publishers in Python and TypeScript (deploy/examples/agents), and
# the README's agent snippets, against 'switchboard dev' and against Apache Kafka (the
# cluster in KAFKA_BOOTSTRAP, else one deploy/kafka/kafka.sh starts on KAFKA_PORT and
# stops); their clients installed pinned by deploy/examples/install.sh.
examples-check: build
	deploy/examples/check.sh

# Only the chaos test, against the broker test-integration would use.
chaos:
	$(MAKE) test-integration INTEGRATION_RUN=TestChaosExactlyOnce

# The chaos test under at_least_once: no result lost and no wrong outcome when routers are
# killed (and, with CHAOS_BROKER_RESTART unset, when the broker restarts too); a second result
# or timeout event after a crash is what at_least_once allows, and the test counts it. CI runs
# both variants (about 2.5 minutes); CHAOS_BROKER_RESTART=false runs the kill-only one.
chaos-at-least-once:
	CHAOS_DELIVERY=at_least_once $(MAKE) chaos

# The secured cluster test (issue 21): kafka.sh cluster up --secure (three nodes, SASL_SSL,
# SCRAM-SHA-512, ACLs; SECURE_KAFKA_PORT and the five ports after it), then
# TestSecureClusterApacheKafka (serve, an agent and send on the least ACLs; refusals),
# then the cluster is stopped and purged whatever the test did.
SECURE_KAFKA_PORT ?= 19192
secure-check:
	@export KAFKA_PORT=$(SECURE_KAFKA_PORT) SWITCHBOARD_KAFKA_DIR=/tmp/switchboard-kafka-secure-$(SECURE_KAFKA_PORT); \
	trap '$(KAFKA_SH) cluster down --purge >/dev/null 2>&1 || true' EXIT; \
	trap 'exit 130' INT TERM; \
	$(KAFKA_SH) cluster down --purge >/dev/null 2>&1 || true; \
	env=$$($(KAFKA_SH) cluster up --secure); set -a; eval "$$env"; set +a; \
	echo "secure-check: KAFKA_BOOTSTRAP=$$KAFKA_BOOTSTRAP (SASL_SSL, ACLs on)"; \
	run=( $(GO) test -v -race -count=1 -timeout 15m -tags integration -run TestSecureClusterApacheKafka ./cmd/switchboard ); \
	echo "$${run[*]}"; "$${run[@]}" 2>&1 | $(INTEGRATION_FILTER)

# The three-broker drill (issue 21): kafka.sh cluster up (DRILL_KAFKA_PORT and the five ports
# after it), then TestDrillThreeBrokers: two exactly_once routers and two agents under an
# open-loop load (DRILL_RATE, default 500/s, 2 s timeouts) while one broker is SIGKILLed and
# brought back, all three are restarted in turn, and a router is SIGKILLed; it prints one
# 'drill:' report line. Before it, on the same cluster, TestLeaderlessCommitIsCommittedThreeBrokers
# (router/kafkaio, about 15 s): a transaction committed while its partition had no leader, which
# Kafka 4.4 leaves hanging (KAFKA-20734), is committed by the hanging-transaction watch.
# The cluster is stopped and purged whatever the drill did. Its schedule
# waits for the replicas after each restart, so its length follows the host (BENCHMARKS.md:
# about 4 minutes at 500/s on a quiet 2-core host, what .ci/run runs every time; 10-13 minutes
# at 100/s at load average 35-75; DRILL_* variables: see the test). DRILL_SHED_LATE=0 runs it with
# the agent's overload.shed_late off; DRILL_TRACE=/abs/file writes each router's answer-time
# estimate and shed counts once a second and the outcomes per second of sending there.
DRILL_KAFKA_PORT ?= 19292
# The test binary is built while the cluster starts (a JVM start is mostly waiting).
drill:
	@export KAFKA_PORT=$(DRILL_KAFKA_PORT) SWITCHBOARD_KAFKA_DIR=/tmp/switchboard-kafka-drill-$(DRILL_KAFKA_PORT); \
	tmp=$$(mktemp -d /tmp/switchboard-drill.XXXXXX); \
	trap '$(KAFKA_SH) cluster down --purge >/dev/null 2>&1 || true; rm -rf "$$tmp"' EXIT; \
	trap 'exit 130' INT TERM; \
	{ $(GO) test -c -tags integration -o "$$tmp/drill.test" ./cmd/switchboard && \
	  $(GO) test -c -tags integration -o "$$tmp/kafkaio.test" ./router/kafkaio; } >"$$tmp/build.log" 2>&1 & build=$$!; \
	$(KAFKA_SH) cluster down --purge >/dev/null 2>&1 || true; \
	env=$$($(KAFKA_SH) cluster up); set -a; eval "$$env"; set +a; \
	echo "drill: KAFKA_BOOTSTRAP=$$KAFKA_BOOTSTRAP"; \
	wait $$build || { cat "$$tmp/build.log"; echo "drill: the test binaries did not build"; exit 1; }; \
	(cd router/kafkaio && SWITCHBOARD_DRILL=1 "$$tmp/kafkaio.test" -test.v -test.count=1 -test.timeout 10m \
		-test.run TestLeaderlessCommitIsCommittedThreeBrokers) 2>&1 | $(INTEGRATION_FILTER); \
	run=( "$$tmp/drill.test" -test.v -test.count=1 -test.timeout 25m -test.run TestDrillThreeBrokers ); \
	echo "(cd cmd/switchboard && $${run[*]})"; \
	(cd cmd/switchboard && SWITCHBOARD_DRILL=1 "$${run[@]}") 2>&1 | $(INTEGRATION_FILTER)

kafka-up:
	$(KAFKA_SH) up

kafka-down:
	$(KAFKA_SH) down

kafka-status:
	$(KAFKA_SH) status

# gofmt and go vet always; golangci-lint (.golangci.yml) when installed: `make lint-tools`.
lint:
	@out=$$(gofmt -l .); if [[ -n $$out ]]; then echo "gofmt -l: these files need gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [[ -x "$(GOLANGCI_LINT)" ]]; then \
		echo "$(GOLANGCI_LINT) run ./..."; "$(GOLANGCI_LINT)" run ./...; \
	else \
		echo "lint: golangci-lint is not installed, skipped (make lint-tools installs $(GOLANGCI_LINT_VERSION))"; \
	fi

lint-tools:
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Switchboard against Spring for Apache Kafka's ReplyingKafkaTemplate on one broker, one Java
# load generator for both (deploy/bench/spring-peer; needs mvn and Java 17). Not part of
# `make check`: it takes about 15 minutes. KAFKA_BOOTSTRAP names a broker, else kafka.sh
# starts one on KAFKA_PORT; PEER_* variables shape the run (see run.sh).
peer-bench:
	bash deploy/bench/spring-peer/run.sh
