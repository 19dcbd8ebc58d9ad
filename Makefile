# The two set-up commands for a fresh machine are `make bench` and `make test`.
GO       ?= go
BIN      := bin
export CGO_ENABLED := 0
# Binaries carry their source revision (run metadata's git_rev) even where
# GOFLAGS says -buildvcs=false: results measured on another machine, whose
# copy of the tree may sit at another commit, must name the code that ran.
VCS      := -buildvcs=auto

.PHONY: all build bench cpu-numbers test vet fmt-check fuzz fuzz-server gpu-build gpu-test gpu-bench gpu-ncu gpu-stack-build gpu-stack gpu-qwen3 clean lint-workflows ab-check

all: build

build:
	$(GO) build $(VCS) -o $(BIN)/roseinfer ./cmd/roseinfer
	$(GO) build $(VCS) -o $(BIN)/bench ./cmd/bench

# The main job on the embedded default: roseinfer on CPU with the built-in tiny
# model, the bundled Azure conversation trace at three load scales, then offline
# throughput, into one run directory with every figure and report.html; the
# console ends with the summary tables and the paths.
bench: build
	$(BIN)/bench online --scales 0.4,0.8,1.6 --offline

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: fmt-check vet build lint-workflows
	$(GO) test -count=1 -timeout 30m ./...

# bench ab's acceptance run (docs/AB.md): 20 A/Bs of two identical sim servers,
# 16 round pairs of 40 requests each (no verdict may fire; the log counts the
# intervals that missed 1.0), then a 20% longer sim step on B must be flagged
# on TPOT. About 4 minutes.
ab-check:
	AB_TRIES=20 AB_REQUESTS=40 AB_ROUNDS=16 $(GO) test -count=1 -timeout 30m -v \
		-run 'TestIdenticalSidesNoFalseAlarm|TestSlowerStepIsFlaggedOnTPOT' ./harness/ab/

# The CPU and sim figures of docs/BENCHMARKS.md on this machine (table last).
cpu-numbers: build
	bash harness/cpu_numbers.sh

# GPU: build here (no CUDA needed), run on the GPU machine with only the binaries.
# The cudalab tag adds the CUDA device's lab (engine/device/cuda/lab_*.go):
# cudabench needs it, the test binary tests it too, and .gpu/lab's bench and
# roseinfer print the device's step statistics (serving_check.sh).
gpu-build:
	mkdir -p .gpu/lab
	$(GO) test -c -tags cudalab -o .gpu/cuda.test ./engine/device/cuda
	$(GO) build -tags cudalab $(VCS) -o .gpu/cudabench ./cmd/cudabench
	$(GO) build -tags cudalab $(VCS) -o .gpu/lab/bench ./cmd/bench
	$(GO) build -tags cudalab $(VCS) -o .gpu/lab/roseinfer ./cmd/roseinfer

# The whole stack (bench + roseinfer on CUDA): issue 4's offline/online figures and feature A/Bs.
gpu-stack-build:
	mkdir -p .gpu
	$(GO) build $(VCS) -o .gpu/bench ./cmd/bench
	$(GO) build $(VCS) -o .gpu/roseinfer ./cmd/roseinfer

gpu-stack:
	bash harness/gpu_stack.sh

# Issue 34's Qwen3-0.6B figures beside GPT-2's (needs gpu-build and gpu-stack-build).
gpu-qwen3:
	bash harness/gpu_qwen3.sh

gpu-test:
	bash engine/device/cuda/gpu_check.sh all

gpu-bench:
	bash engine/device/cuda/gpu_check.sh bench

gpu-ncu:
	bash engine/device/cuda/gpu_check.sh ncu

# The server's request fuzzer beyond its seed corpus (which `make test` runs);
# FUZZTIME=1000000x repeats the documented 10^6-execution run.
FUZZTIME ?= 60s
fuzz-server:
	$(GO) test ./engine/server -run '^$$' -fuzz FuzzCompletionsHandler -fuzztime $(FUZZTIME)

# GitHub workflows are checked with actionlint (a go tool dependency, pinned in go.mod).
lint-workflows:
	$(GO) tool actionlint .github/workflows/*.yml

clean:
	rm -rf $(BIN)
