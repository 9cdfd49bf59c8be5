# tierkv: the two commands of the README, and a few helpers.
#
#   make run    install what is missing, build (Release), start a standalone manager
#   make test   install what is missing, build, run every test
#
# BUILD_DIR and JOBS may be overridden: make test BUILD_DIR=build-debug

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
PYTHON ?= /usr/bin/python3
CMAKE_FLAGS ?=

.PHONY: run run-cluster test test-sanitize test-tsan fuzz deps build bench format format-check clean

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/tierkv-server --kv-events-endpoint tcp://127.0.0.1:5557 --data-dir ./data \
	  --ssd-dir ./data/ssd --ssd-size 4GiB

# A local etcd and three managers on loopback (scripts/run-cluster.sh).
run-cluster: build
	scripts/run-cluster.sh $(BUILD_DIR)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 300

# AddressSanitizer + UndefinedBehaviorSanitizer build of the C++ tree, its unit
# and integration suites, then the Python suite against the sanitized manager
# (the Python module itself comes from the normal build).
SAN_DIR ?= build-sanitize
SAN_FLAGS = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
test-sanitize: build
	@cmake -S . -B $(SAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERKV_BUILD_BENCH=OFF \
	  -DTIERKV_BUILD_PYTHON=OFF -DTIERKV_THREAD_SAFETY_TEST=OFF -DCMAKE_CXX_FLAGS="$(SAN_FLAGS)" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
	@cmake --build $(SAN_DIR) -j $(JOBS)
	cd $(SAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  TIERKV_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) TIERKV_SERVER_BIN=$(CURDIR)/$(SAN_DIR)/tierkv-server \
	  $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# ThreadSanitizer build; the concurrency-heavy suites (store, events, the data
# channel, grants and fetcher, the integration tests and the Python suite, all
# against the TSan-built manager). tests/tsan.supp silences libzmq, gRPC and
# abseil, which are not built with TSan.
TSAN_DIR ?= build-tsan
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp"
test-tsan: build
	@cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERKV_BUILD_BENCH=OFF \
	  -DTIERKV_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS="-O1 -fno-omit-frame-pointer -fsanitize=thread" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS)
	cd $(TSAN_DIR) && $(TSAN_ENV) ./common_test && $(TSAN_ENV) ./store_test && \
	  $(TSAN_ENV) ./events_test && \
	  $(TSAN_ENV) ./transfer_test && $(TSAN_ENV) ./cluster_unit_test && \
	  $(TSAN_ENV) ./integration_test
	$(TSAN_ENV) TIERKV_BUILD_DIR=$(abspath $(BUILD_DIR)) \
	  TIERKV_SERVER_BIN=$(abspath $(TSAN_DIR))/tierkv-server \
	  $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# Coverage-guided fuzzing with libFuzzer (clang), FUZZ_SECONDS per target,
# starting from the seed corpora in fuzz/corpus (new findings go to
# $(FUZZ_DIR)/corpus-<target>; crashes to $(FUZZ_DIR)/crash-*).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = protocol session rest_body config ssd_blob
fuzz: deps
	@cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DTIERKV_BUILD_FUZZ=ON -DTIERKV_BUILD_TESTS=OFF -DTIERKV_BUILD_BENCH=OFF -DTIERKV_BUILD_PYTHON=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target $(addsuffix _fuzz,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus-$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  (cd $(FUZZ_DIR) && ./$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    -print_final_stats=1 corpus-$$t $(CURDIR)/fuzz/corpus/$$t) || exit 1; \
	done

bench: build
	$(BUILD_DIR)/tierkv_bench --json bench/results/latest.json
	$(BUILD_DIR)/tierkv_ssd_bench --dir ./bench-ssd --json bench/results/ssd.json
	$(BUILD_DIR)/tierkv_store_bench --json bench/results/store.json
	$(BUILD_DIR)/tierkv_cluster_bench --json bench/results/cluster.json
	$(BUILD_DIR)/tierkv_inventory_bench --json bench/results/inventory.json
	$(BUILD_DIR)/tierkv_inventory_scale_bench --json bench/results/inventory_scale.json
	$(BUILD_DIR)/tierkv_remote_bench --json bench/results/remote.json
	$(BUILD_DIR)/tierkv_data_channel_bench --json bench/results/data_channel.json
	/usr/bin/python3 bench/hicache_bench.py --build $(BUILD_DIR)
	/usr/bin/python3 bench/vllm_bench.py --build $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

format-check: deps
	clang-format --dry-run -Werror $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD_DIR)
