# User entry points. `make demo` and `make test` do all the set-up themselves.
BUILD ?= build
MESON_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps build test test-torch-full demo clean asan tsan format

all: build

deps:
	@scripts/install-deps.sh
	@scripts/install-python-deps.sh
	@scripts/install-tf-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_FLAGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

test: build
	meson test -C $(BUILD) --print-errorlogs --num-processes $(JOBS); \
	  status=$$?; scripts/test_summary.py $(BUILD) $$status && exit $$status

# torch's own generic distributed suite (tests/torch/generic_suite) on the tictac backend at
# WORLD_SIZE=2, then the same tests on gloo: fails only on a failure that gloo passes (or a
# regression of EXPECTED_PASS). Long (tens of minutes on 2 cores), so not part of `make test`.
test-torch-full: build
	.venv/bin/pip show expecttest >/dev/null 2>&1 || .venv/bin/pip install expecttest
	PYTHONPATH=python TICTAC_BUILD_DIR=$(BUILD) .venv/bin/python tests/torch/generic_suite/run_generic_suite.py --world-size 2 --compare-gloo

demo: build
	@scripts/demo.sh $(BUILD)

# Sanitizer builds of the test suites (separate build folders; each builds only what its suites
# need: scripts/build_suite_targets.py). The fuzz suite is left out: its targets are always built
# with clang's ASan by tests/fuzz/run_fuzz.sh. `make asan` is not in .ci/run (two instrumented
# builds do not fit CI's 90 minutes on 2 cores: docs/architecture.md "Sanitizers in CI").
ASAN_SUITES ?= unit cli verbs ucx conformance multiproc bench-smoke
asan: deps
	[ -f build-asan/build.ninja ] || meson setup build-asan -Dtorch=disabled -Dtensorflow=disabled -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
	scripts/build_suite_targets.py build-asan $(JOBS) $(ASAN_SUITES)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C build-asan --no-rebuild --print-errorlogs --num-processes $(JOBS) $(addprefix --suite ,$(ASAN_SUITES)); \
	  status=$$?; scripts/test_summary.py build-asan $$status && exit $$status

# ThreadSanitizer on the suites that exercise our own threads (docs/architecture.md, "Sanitizers
# in CI"): unit, verbs, conformance, multiproc. Not under TSan: ucx and cuda (uninstrumented
# third-party threads), cli and bench-smoke (the same libraries, driven from one thread), fuzz,
# python. Suppressions (third-party code only, each justified): tests/tsan.supp. The group tests
# link UCX (the backend registry): UCX's memory hooks (libucm intercepts madvise in every new
# thread's start) crash under TSan's interceptors, so they are switched off (UCX_MEM_*).
TSAN_SUITES ?= unit verbs conformance multiproc
tsan: deps
	[ -f build-tsan/build.ninja ] || meson setup build-tsan -Dtorch=disabled -Dtensorflow=disabled -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized
	scripts/build_suite_targets.py build-tsan $(JOBS) $(TSAN_SUITES)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none \
	  meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes $(JOBS) $(addprefix --suite ,$(TSAN_SUITES)); \
	  status=$$?; scripts/test_summary.py build-tsan $$status && exit $$status

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan build-tsan
