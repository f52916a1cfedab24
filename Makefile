# seckill: `make run` brings everything up; `make test` proves it.
SHELL := /bin/bash
GO    ?= go
# Builds without the checkout's path (-trimpath): otherwise Go keys every
# package of this module by its directory, and a fresh clone elsewhere (as
# CI's) compiles the module again, race, plain and vet, where the build
# cache already holds it.
ifeq ($(filter -trimpath,$(GOFLAGS)),)
export GOFLAGS += -trimpath
endif

# Development defaults; any SECKILL_* variable in the environment wins.
export SECKILL_ENV          ?= dev
export SECKILL_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/seckill?sslmode=disable
# A single Redis unless a cluster or Sentinel is configured (exactly one
# topology; see docs/operations.md, "Topologies").
ifeq ($(SECKILL_REDIS_CLUSTER_ADDRS)$(SECKILL_REDIS_SENTINEL_ADDRS),)
export SECKILL_REDIS_URL    ?= redis://127.0.0.1:6379/0
endif
# Tests create their own databases (one per test) on this server and use
# unique Redis key prefixes / DB numbers, so they never touch the dev data.
export SECKILL_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export SECKILL_TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0
# The local Redis Cluster (scripts/cluster.sh) that `make test` runs the
# admission and end-to-end suites on as well; the rest runs on the single node.
# ($(or) would split a comma-separated default into its arguments.)
DEFAULT_TEST_REDIS_CLUSTER_ADDRS := 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005,127.0.0.1:7006
TEST_REDIS_CLUSTER_ADDRS ?= $(if $(SECKILL_TEST_REDIS_CLUSTER_ADDRS),$(SECKILL_TEST_REDIS_CLUSTER_ADDRS),$(DEFAULT_TEST_REDIS_CLUSTER_ADDRS))
# Of internal/app, the cluster run takes the purchase path end to end,
# subscriptions and many instances (the Redis fault tests own private servers).
CLUSTER_APP_RUN ?= ^Test(SeedScenario|PersistIsIdempotent|EnqueueTwiceMakesOneTask|Reconciler|RewarmAfterRedisLoss|Purchase|PermanentFailure|SecondOrderOfAUser|OrderStatusSubscription|ManyInstances|CampaignLost)
# The race detector sleeps a second when a test binary exits, to let late
# goroutines report; make test runs some thirty binaries. A race in a test
# is still reported in that test.
export GORACE ?= atexit_sleep_ms=0

# make test runs eight suites at once (each prints when it ends); together
# they keep the two cores busy, so each suite's share of the machine sets
# how long it takes.
# internal/app's tests run in five suites from one race test binary, built
# once (APP_TEST_BIN): test-app on one Redis database, one test at a time;
# its fault tests, which start Redis servers of their own
# (testenv.StartRedisServer, StartCluster, StartSentinel) and touch no
# shared database, in two suites of their own beside the rest; a test not
# named here stays in test-app. Each name is a whole test name.
APP_FAULTS_CLUSTER = TestClusterMasterKilled TestClusterMasterKilledBuyersReturn TestClusterReplicaRestarted \
	TestClusterPostgresAway TestClusterProcessesKilled TestClusterFailoverToStaleReplica TestClusterShardMasterKilled \
	TestCheckShards TestAdmitDuringSlotMigration
APP_FAULTS_REDIS = TestRedisRestartedEmpty TestRedisLostItsLastWrites TestRedisRestartedEmptySharded \
	TestRedisLostItsLastWritesSharded TestRedisDownForAWhile \
	TestRedisKilled TestRedisEmptyWhilePostgresSlow TestSentinelPurchase TestSentinelMasterKilled \
	TestUnreplicatedAdmission TestUnreplicatedWriteReplyLost TestUnreplicatedCommitLostPostgresAway \
	TestQueueIntervalReachesTheWorker
# internal/app's slowest tests that need no server of their own (browsers,
# timers) run in a suite beside test-app, on Redis databases of their own
# (SECKILL_TEST_REDIS_DB_SHIFT, testenv.OwnedDB).
APP_SLOW = TestEventsReachAFlakyReceiver TestSalePageInBrowser TestSalePageFiftyBuyers \
	TestDashboardInBrowser TestPlaygroundInBrowser TestWaitingRoomFair TestWaitingRoomPasses \
	TestWaitingRoomInstancesAndLoss TestSalePageWaitingRoom TestSalePageRetries TestSalePageFrameAncestors \
	TestDashboardWaitingRoomInBrowser TestSalePageProofOfWork TestDashboardSignInThroughProviderInBrowser \
	TestSalePageFollowsCampaignEdits TestSalePageLostAnswerThenSoldOut
# The order's life against its model takes many times longer beside the
# other suites than alone: it makes a few thousand short steps, each
# several round trips to Postgres and Redis that wait for a core. It runs
# in a suite of its own (databases shifted by 9), so that it delays no other
# test.
APP_MODEL = TestOrderLifeModel
TEST_SUITES = test-single test-app test-app-slow test-app-model test-faults-cluster test-faults-redis test-cluster test-stack
# test-single runs this many packages at once, its longest first: it is
# the last suite to end, and with the small packages last its end leaves
# fewer cores idle.
TEST_SINGLE_P ?= 3
TEST_SINGLE_FIRST = ./internal/bench/ ./internal/admission/ ./graph/ ./cmd/seckill/ ./internal/store/ ./internal/auth/ ./jobs/
empty :=
space := $(empty) $(empty)
# tests_re NAMES: a -run/-skip pattern matching exactly those top-level tests.
tests_re = ^($(subst $(space),|,$(strip $(1))))$$
# The race test binaries are linked without DWARF (-w): make test links
# some forty, each anew (go caches no test binary), and writing DWARF is a
# large part of each link; stack traces and race reports read the symbol table,
# which stays. Debuggers need it: TEST_LDFLAGS= keeps it.
TEST_LDFLAGS ?= -ldflags=-w
# go test through gotestsum (a go.mod tool; gotest adds -race): the output reads as go test's,
# failed tests again in full at the end of each suite, and every event goes
# to .run/test/NAME.json for the slowest-tests summary.
gotestsum_flags = --format standard-quiet --hide-summary=skipped --jsonfile $(CURDIR)/.run/test/$(1).json
gotestsum = $(GO) tool gotestsum $(call gotestsum_flags,$(1)) --
gotest = $(call gotestsum,$(1)) -race -count=1 $(TEST_LDFLAGS)
# apptest SUITE,ENV: gotest for internal/app with the variables ENV, running
# the race test binary APP_TEST_BIN, which make test builds once for its
# five suites (each go test would link the same binary again);
# a suite run alone builds one of its own. As go test, it runs in the
# package's directory.
apptest = $(if $(APP_TEST_BIN),,$(GO) test -c -race $(TEST_LDFLAGS) -o .run/$(1).test ./internal/app/ &&) \
	cd internal/app && $(2) $(GO) tool gotestsum $(call gotestsum_flags,$(1)) --raw-command -- $(GO) tool test2json -t -p seckill/internal/app \
	$(CURDIR)/$(or $(APP_TEST_BIN),.run/$(1).test) -test.v=test2json -test.paniconexit0 -test.count=1
# make -O (GNU make 4) prints each suite whole when it ends.
OUTPUT_SYNC = $(if $(filter 3.%,$(MAKE_VERSION)),,--output-sync=target)

GENERATED = { find graph web -name '*.go' -newer /dev/null 2>/dev/null; echo docs/configuration.md; } | sort | xargs -r sha256sum

.PHONY: run stop test $(TEST_SUITES) test-cluster-suites test-model build playground salepage graph-audit generate check-generate check-deploy services test-services cluster vet fmt bench bench-load bench-fsync bench-wait bench-limit test-faults clean

# Where make run's development payment provider listens.
PROVIDER_ADDR ?= 127.0.0.1:8090

## run: start Postgres/Redis if needed, migrate, and serve API + worker on :8080
##   (with the development payment provider on $(PROVIDER_ADDR), logging to .run/provider.log);
##   a private Postgres/Redis it started keeps running for the next make run: make stop
run: build services
	./bin/seckill migrate up
	@# The dashboard's development operator, unless one is configured: user
	@# admin with a password made once per checkout (kept in .run/); the
	@# banner prints both.
	@# The development payment provider, unless one is configured: it
	@# answers the server's refund calls and confirms them by webhook; it
	@# stops with the server.
	@# On the way out it says what keeps running (scripts/services.sh running).
	@if [ -z "$$SECKILL_ADMIN_USER" ] && [ "$$SECKILL_ENV" = dev ]; then \
		mkdir -p .run; \
		[ -s .run/admin-password ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > .run/admin-password); \
		export SECKILL_ADMIN_USER=admin SECKILL_ADMIN_PASSWORD=$$(cat .run/admin-password); \
	fi; \
	provider=; \
	trap 'if [ -n "$$provider" ]; then kill $$provider 2>/dev/null; wait $$provider 2>/dev/null; fi; \
		left=$$(scripts/services.sh running); \
		if [ -n "$$left" ]; then echo "make run: left running for the next make run (make stop stops them):"; echo "$$left" | sed "s/^/  /"; fi' EXIT; \
	if [ -z "$$SECKILL_PAYMENT_REFUND_URL" ] && [ "$$SECKILL_ENV" = dev ]; then \
		mkdir -p .run; \
		./bin/seckill payments provider --listen $(PROVIDER_ADDR) >.run/provider.log 2>&1 & provider=$$!; \
		export SECKILL_PAYMENT_REFUND_URL=http://$(PROVIDER_ADDR)/refunds; \
	fi; ./bin/seckill serve

## test: everything CI checks: vet, go.mod tidy, generated code current, alert
## rules, then race tests against real services in eight suites at once (every
## package but internal/app on a single Redis; internal/app's tests on it, its
## slowest and its model test beside them on other databases, its fault tests
## on their own servers, in two suites; the Redis suites again on a local
## cluster; the purchase path's stack depth, without -race), and the slowest
## ten tests
test:
	@# The services first: on a new machine they install Debian's packages,
	@# and apt-get takes one lock, which promtool.sh's download needs too.
	@# Then the steps that need nothing of one another at once (in a fresh
	@# clone the npm installs are most of the wait before the
	@# suites); vet needs the bundles the packages embed.
	$(MAKE) --no-print-directory test-services
	@$(MAKE) --no-print-directory -j3 $(OUTPUT_SYNC) playground salepage graph-audit check-deploy
	$(MAKE) --no-print-directory vet
	$(GO) mod tidy -diff
	$(MAKE) --no-print-directory check-generate
	@# Compile every package and test once, before the suites share the cache.
	$(GO) list -race -test -export -deps ./... >/dev/null
	@rm -rf .run/test; mkdir -p .run/test
	$(GO) test -c -race $(TEST_LDFLAGS) -o .run/test/app.test ./internal/app/
	@echo "make test: $(TEST_SUITES) at once; each prints when it ends"
	@$(MAKE) --no-print-directory -k -j$(words $(TEST_SUITES)) $(OUTPUT_SYNC) APP_TEST_BIN=.run/test/app.test $(TEST_SUITES); status=$$?; \
	set -- .run/test/*.json; if [ -e "$$1" ]; then echo; $(GO) run ./scripts/slowest "$$@" || true; fi; \
	exit $$status

## test-single: every package but internal/app on the single Redis of
##   SECKILL_TEST_REDIS_URL; make test-app, test-app-slow, test-app-model,
##   test-faults-cluster and test-faults-redis run internal/app's tests (all need
##   make test-services first)
test-single:
	@mkdir -p .run/test
	SECKILL_TEST_REDIS_CLUSTER_ADDRS= $(call gotest,$@) -timeout 15m -p $(TEST_SINGLE_P) $(TEST_SINGLE_FIRST) $$($(GO) list ./... | grep -vx seckill/internal/app)

## test-app: internal/app's tests on the single Redis, but its fault tests, its
##   slowest and its model test
test-app:
	@mkdir -p .run/test
	$(call apptest,$@,SECKILL_TEST_REDIS_CLUSTER_ADDRS=) -test.timeout=15m -test.skip '$(call tests_re,$(APP_FAULTS_CLUSTER) $(APP_FAULTS_REDIS) $(APP_SLOW) $(APP_MODEL))'

## test-app-slow: internal/app's slowest tests on the single Redis (databases
##   shifted by 6 from test-app's), beside test-app
test-app-slow:
	@mkdir -p .run/test
	$(call apptest,$@,SECKILL_TEST_REDIS_CLUSTER_ADDRS= SECKILL_TEST_REDIS_DB_SHIFT=6) -test.timeout=15m -test.run '$(call tests_re,$(APP_SLOW))'

## test-app-model: internal/app's model test of the order's life on the single
##   Redis (databases shifted by 9), beside test-app
test-app-model:
	@mkdir -p .run/test
	$(call apptest,$@,SECKILL_TEST_REDIS_CLUSTER_ADDRS= SECKILL_TEST_REDIS_DB_SHIFT=9) -test.timeout=15m -test.run '$(call tests_re,$(APP_MODEL))'

## test-faults-cluster: internal/app's fault tests on private Redis Clusters
test-faults-cluster:
	@mkdir -p .run/test
	$(call apptest,$@,SECKILL_TEST_REDIS_CLUSTER_ADDRS=) -test.timeout=10m -test.run '$(call tests_re,$(APP_FAULTS_CLUSTER))'

## test-faults-redis: internal/app's fault tests on private redis-servers and Sentinels
test-faults-redis:
	@mkdir -p .run/test
	$(call apptest,$@,SECKILL_TEST_REDIS_CLUSTER_ADDRS=) -test.timeout=10m -test.run '$(call tests_re,$(APP_FAULTS_REDIS))'

## test-stack: TestPurchaseStackDepth, the purchase path's stack depth on a new
##   connection, in the build production runs: without -race, whose frames are
##   larger (it starts a redis-server of its own)
test-stack:
	@mkdir -p .run/test
	SECKILL_TEST_REDIS_CLUSTER_ADDRS= $(call gotestsum,$@) -count=1 -timeout 5m -run '^TestPurchaseStackDepth$$' ./internal/app/

## test-model: the stateful property tests (pgregory.net/rapid: challenge tokens,
## payments) against their models on real Postgres and Redis (make services
## or make test-services first), a thousand sequences each instead of make
## test's few dozen
test-model:
	SECKILL_TEST_REDIS_CLUSTER_ADDRS= $(GO) test -race -count=1 -timeout 30m -run 'Model' ./internal/app/ -rapid.checks=1000

## check-deploy: promtool checks and unit-tests the Prometheus alert rules in deploy/
check-deploy:
	scripts/promtool.sh

## build: bin/seckill (the service) and bin/seckill-bench (the load test)
build: playground salepage
	$(GO) build -o bin/ ./cmd/seckill ./cmd/seckill-bench

## playground: bundle GraphiQL from the npm packages pinned in
## playground/package-lock.json into playground/dist/assets, which the binary
## embeds (build output: never committed). npm ci runs only when the lock file
## changed; node_modules stays in playground/ as a cache. Install scripts are
## off: esbuild's only checks its binary and raced npm's own writes in CI
## (ETXTBSY); its JS API finds the binary in @esbuild/<platform> without it.
playground: playground/dist/assets/playground.js

playground/node_modules/.package-lock.json: playground/package-lock.json
	@command -v npm >/dev/null || { echo "make playground needs Node.js 20 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd playground && npm ci --no-audit --no-fund --ignore-scripts

playground/dist/assets/playground.js: playground/node_modules/.package-lock.json playground/build.mjs $(wildcard playground/src/*)
	cd playground && node build.mjs

## salepage: bundle the buyers' sale page (salepage/src, with graphql-ws and
## @noble/hashes from salepage/package-lock.json) into salepage/dist/assets under content-hashed
## names, which the binary embeds (build output: never committed); as the
## playground, npm ci runs only when the lock file changed.
salepage: salepage/dist/assets/.built

salepage/node_modules/.package-lock.json: salepage/package-lock.json
	@command -v npm >/dev/null || { echo "make salepage needs Node.js 20 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd salepage && npm ci --no-audit --no-fund --ignore-scripts

salepage/dist/assets/.built: salepage/node_modules/.package-lock.json salepage/build.mjs $(wildcard salepage/src/*)
	cd salepage && node build.mjs
	@touch $@

## graph-audit: install graphql-http (pinned in graph/audit/package-lock.json),
## whose GraphQL-over-HTTP audit TestGraphQLOverHTTPAudit runs against the
## endpoint (graph/audit/audit.mjs); as the playground, npm ci runs only when
## the lock file changed.
graph-audit: graph/audit/node_modules/.package-lock.json

graph/audit/node_modules/.package-lock.json: graph/audit/package-lock.json
	@command -v npm >/dev/null || { echo "make graph-audit needs Node.js 20 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd graph/audit && npm ci --no-audit --no-fund --ignore-scripts

## test-cluster: the admission and end-to-end suites on the local Redis Cluster,
##   which it starts when it is not running and then stops again (unless another
##   make test is using it)
test-cluster:
	@SECKILL_TEST_REDIS_CLUSTER_ADDRS=$(TEST_REDIS_CLUSTER_ADDRS) scripts/cluster.sh run $(MAKE) --no-print-directory test-cluster-suites

# The suites of test-cluster, on a cluster that is up. A cluster has one
# database: the two run one after the other.
test-cluster-suites:
	@mkdir -p .run/test
	SECKILL_TEST_REDIS_CLUSTER_ADDRS=$(TEST_REDIS_CLUSTER_ADDRS) $(call gotest,test-cluster) -timeout 10m ./internal/admission/ ./lua/
	$(call apptest,test-cluster-app,SECKILL_TEST_REDIS_CLUSTER_ADDRS=$(TEST_REDIS_CLUSTER_ADDRS)) -test.timeout=10m -test.run '$(CLUSTER_APP_RUN)'

services:
	scripts/services.sh

# The Postgres and single Redis the tests use, and Chromium; test-cluster
# starts its cluster itself.
test-services:
	SECKILL_DATABASE_URL=$(SECKILL_TEST_DATABASE_URL) SECKILL_REDIS_URL=$(SECKILL_TEST_REDIS_URL) SECKILL_REDIS_CLUSTER_ADDRS= SECKILL_REDIS_SENTINEL_ADDRS= scripts/services.sh
	scripts/chromium.sh

## cluster: start (or check) the local Redis Cluster, which keeps running until
##   make stop; scripts/cluster.sh stop|reset|status
cluster:
	SECKILL_TEST_REDIS_CLUSTER_ADDRS=$(TEST_REDIS_CLUSTER_ADDRS) scripts/cluster.sh

## stop: stop what make run, make test and make cluster started and left
##   running in this checkout: the private Postgres and Redis under .run/ and
##   its local Redis Cluster nodes (never the machine's own servers, nor
##   another checkout's cluster); their data stays in .run/
stop:
	@scripts/services.sh stop
	@SECKILL_TEST_REDIS_CLUSTER_ADDRS=$(TEST_REDIS_CLUSTER_ADDRS) scripts/cluster.sh stop

## generate: regenerate gqlgen and templ code and docs/configuration.md (committed)
generate:
	$(GO) tool gqlgen generate
	@if [ -n "$$(find web -name '*.templ')" ]; then $(GO) tool templ generate; fi
	$(GO) run ./scripts/configdoc

check-generate:
	@before=$$($(GENERATED)); \
	$(MAKE) --no-print-directory -s generate >/dev/null; \
	after=$$($(GENERATED)); \
	if [ "$$before" != "$$after" ]; then \
		echo "generated code is not current: run 'make generate' and commit the result"; \
		diff <(echo "$$before") <(echo "$$after"); exit 1; \
	fi; echo "generated code is current"

vet:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.run/*' -not -path './playground/node_modules/*' -not -path './salepage/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(find . -name '*.go' -not -path './.run/*' -not -path './playground/node_modules/*' -not -path './salepage/node_modules/*')

## bench: Go benchmarks of the admission path and the batch writer
bench: test-services
	$(GO) test -run '^$$' -bench . -benchmem ./internal/admission/ ./internal/store/ ./jobs/

# The server the load tests drive (make run's by default); BENCH_ARGS adds flags.
BENCH_URL ?= http://localhost:8080/graphql

## bench-load: the seed's load test (seckill-bench) against the running server, e.g.
##   make bench-load BENCH_ARGS='--compare sync,ceiling'
bench-load: build
	./bin/seckill-bench --url $(BENCH_URL) $(BENCH_ARGS)

## bench-fsync: the cost of Redis appendfsync always against everysec, in one run
##   (two private redis-servers with their AOF under .run/, the seckill binary on each)
bench-fsync: build
	@mkdir -p .run
	./bin/seckill-bench --url $(BENCH_URL) --duration 5s --concurrency 64 --warm \
		--users 60000 --stock 60000 --compare fsync --fsync-dir .run $(BENCH_ARGS)

## test-faults: the fault tests at full length (Postgres away 30 s; kill -9 of an
##   API and a worker process, which builds the seckill binary), on private clusters
test-faults: test-services
	SECKILL_LONG_FAULTS=1 $(GO) test -race -count=1 -timeout 10m -run '^TestCluster' -v ./internal/app/

## bench-wait: the cost of WAIT for one replica before ACCEPTED, in one run
##   (a private redis-server master and replica per setting, the seckill binary on each)
bench-wait: build
	@mkdir -p .run
	./bin/seckill-bench --url $(BENCH_URL) --duration 5s --concurrency 64 --warm \
		--users 60000 --stock 60000 --compare wait --fsync-dir .run $(BENCH_ARGS)

## bench-limit: the cost of the shared per-user and per-address limits on every purchase,
##   in one run (a private redis-server per setting, the seckill binary on each)
bench-limit: build
	@mkdir -p .run
	./bin/seckill-bench --url $(BENCH_URL) --duration 5s --concurrency 64 --warm \
		--users 60000 --stock 60000 --compare limit --fsync-dir .run $(BENCH_ARGS)

## bench-compare: BASE=<commit> against the working tree, in one run: builds both seckill
##   binaries (BASE in a git worktree under .run/, removed after the build; the binary
##   is kept in .run/bench-base/<commit>/), starts each on a private redis-server and
##   database, runs a closed load and the seed's burst against them alternated (base,
##   head, base, head...), and prints the throughput ratio and each process's CPU per
##   purchase, e.g. make bench-compare BASE=main BENCH_ARGS='--rounds 8'
BENCH_BASE_DIR := .run/bench-base
.PHONY: bench-compare
bench-compare: build
	@if [ -z "$(BASE)" ]; then echo "usage: make bench-compare BASE=<commit> [BENCH_ARGS='--rounds 8']"; exit 2; fi
	@set -e; \
	sha=$$(git rev-parse --verify --quiet "$(BASE)^{commit}") || { echo "bench-compare: $(BASE) is not a commit"; exit 2; }; \
	bin=$(BENCH_BASE_DIR)/$$sha/seckill; \
	if [ ! -x $$bin ]; then \
		src=$(BENCH_BASE_DIR)/src-$$sha; \
		git worktree remove --force $$src >/dev/null 2>&1 || rm -rf $$src; \
		mkdir -p $(BENCH_BASE_DIR)/$$sha; \
		echo "building $(BASE) ($$sha) in $$src"; \
		git worktree add --detach --quiet $$src $$sha; \
		status=0; (cd $$src && $(GO) build -o $(CURDIR)/$$bin.tmp ./cmd/seckill) || status=$$?; \
		git worktree remove --force $$src; \
		[ $$status = 0 ] || { echo "bench-compare: $(BASE) does not build"; exit $$status; }; \
		mv $$bin.tmp $$bin; \
	fi; \
	./bin/seckill-bench --compare base --base-binary $$bin --seckill ./bin/seckill --warm \
		--fsync-dir .run $(BENCH_ARGS)

clean:
	rm -rf bin playground/dist/assets salepage/dist/assets
