# cstream — top-level entry points. `make run` and `make test` work on a fresh
# Debian 12 machine: they install missing packages, build, then run.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
SANITIZE   ?=
DEBS       := build-essential cmake pkg-config librdkafka-dev libcmocka-dev

.PHONY: all deps build run test proof test-asan test-tsan clean install

all: build

deps:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCSTREAM_SANITIZE=$(SANITIZE) >/dev/null
	cmake --build $(BUILD) -j$$(nproc)

# The demo: the payouts service on the embedded cluster.
run: build
	./$(BUILD)/examples/payouts

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

# The crash proof: 20 SIGKILLs of a Tracked payouts service, with the table of
# lost and duplicated records (CI runs 3 as part of `make test`).
proof: build
	CS_KILLS=20 CSTREAM_LOG_LEVEL=error ./$(BUILD)/tests/test_kill

# Sanitizer builds of the same suite.
test-asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Debug SANITIZE=address,undefined
test-tsan:
	$(MAKE) test BUILD=build-tsan BUILD_TYPE=Debug SANITIZE=thread

install: build
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-tsan
