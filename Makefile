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

.PHONY: run test deps build bench format clean

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/tierkv-server --kv-events-endpoint tcp://127.0.0.1:5557 --data-dir ./data

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 300

bench: build
	$(BUILD_DIR)/tierkv_bench --json bench/results/latest.json

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD_DIR)
