# offerlog: `make run` starts the platform, `make test` checks it,
# `make bench` measures it. Missing tools are installed on first use.

GO          ?= go
STATICCHECK_VERSION ?= v0.8.2
GOBIN       := $(shell $(GO) env GOPATH)/bin
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TEST_FLAGS  ?= -race -shuffle=on -timeout 20m
# BENCH is the bench's own module (make bench; its tests run in make test)
BENCH       := cmd/offerlog/internal/bench

PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2

.PHONY: run test test-chaos test-soak test-topology bench lint vet proto deps tools build release deploy-version pin-images clean

## run: start the whole platform on the embedded broker (data in ./data)
# The binary, not go run: go run exits 1 when it is interrupted, so Ctrl-C
# ended make run in "Error 1" although offerlog had stopped cleanly.
run: build
	bin/offerlog dev $(ARGS)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

## build: build bin/offerlog
# Without cgo, as the image and the release binaries are: make run and make
# bench run the form that ships (its local stores' memory is Go heap,
# platform.GoMemory).
build: deps
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/offerlog ./cmd/offerlog

## release: VERSION=X.Y.Z make release: the deploy files name VERSION
## (deploy-version), versioned static binaries in dist/ (Linux and macOS,
## amd64 and arm64) with their SHA-256 sums, and the image offerlog:VERSION
## where a Docker engine runs: the image and the manifests carry one version
RELEASE_TARGETS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
release: deps deploy-version
	@rm -rf dist && mkdir -p dist
	@for t in $(RELEASE_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; out=dist/offerlog-$(VERSION)-$$os-$$arch; \
		echo "building $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$out ./cmd/offerlog || exit 1; \
	done
	@cd dist && sha256sum offerlog-* > SHA256SUMS && cat SHA256SUMS
	@if docker info >/dev/null 2>&1; then \
		docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t offerlog:$(VERSION) . ; \
	else \
		echo "no Docker engine here: the image is not built; where one runs: docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t offerlog:$(VERSION) ."; \
	fi

## vet: go vet over the whole module, the forks included. The unsafeptr
## check is off: its one finding is hamba/avro's noescape (the runtime's own
## trick, nolint upstream), which vet reports in every package that imports
## avro; offerlog's own code imports unsafe only in protoc's output.
vet:
	$(GO) vet -unsafeptr=false ./...
	cd $(BENCH) && $(GO) vet ./...

## deploy-version: write VERSION into the deploy files: the image tag of the
## kustomize base and overlay and of compose, and the init Job's name (a
## Job's template is immutable: each version's is a new Job)
deploy-version:
	@case "$(VERSION)" in *[!0-9A-Za-z._-]*|"") echo "VERSION=$(VERSION) is not an image tag"; exit 2;; esac
	sed -i -E 's/^( *newTag: *).*/\1$(VERSION)/' deploy/k8s/base/kustomization.yaml deploy/k8s/overlays/example/kustomization.yaml
	sed -i -E 's/offerlog-init-[0-9A-Za-z-]+$$/offerlog-init-$(subst .,-,$(VERSION))/' deploy/k8s/base/50-offerlog.yaml
	sed -i -E 's/OFFERLOG_VERSION:-[^}]+/OFFERLOG_VERSION:-$(VERSION)/; s/^( *VERSION: *).*/\1$(VERSION)/' deploy/compose.yaml
	sed -i -E '0,/^  version: /s/^(  version: ).*/\1$(VERSION)/' cmd/offerlog/internal/api/openapi.yaml

## pin-images: pin the third-party images of the deploy files (Kafka,
## ZooKeeper, YDB, the Go and distroless bases) to the digests their
## registries give their tags now; run it again to move the pins (needs
## the registries: Docker Hub and gcr.io)
pin-images:
	$(GO) run ./deploy/pin deploy/k8s/base/*.yaml deploy/compose.yaml deploy/Dockerfile

## test: vet, then every test with the race detector against real parts
test: deps tools vet
	OFFERLOG_REQUIRE_KCAT=1 OFFERLOG_REQUIRE_ZOOKEEPER=1 OFFERLOG_REQUIRE_PROMTOOL=1 $(GO) test $(TEST_FLAGS) ./...
	cd $(BENCH) && $(GO) test $(TEST_FLAGS) ./...

## test-chaos: the kill -9 test at nightly length: 20 kills of the whole
## platform under load (OFFERLOG_CHAOS_KILLS=N for more, OFFERLOG_CHAOS_SEED
## repeats a run's moments); figures in docs/RELIABILITY.md
test-chaos: deps tools
	OFFERLOG_CHAOS_KILLS=$${OFFERLOG_CHAOS_KILLS:-20} OFFERLOG_REQUIRE_ZOOKEEPER=1 \
		$(GO) test -race -count=1 -timeout 90m -v -run '^TestKill9AnywhereUnderLoad$$' ./cmd/offerlog/internal/platform/

## test-soak: DURATION=1h make test-soak: offerlog dev's form (the broker
## inside the process) under a steady load with a fault every minute (a
## kill -9 or a pause; OFFERLOG_SOAK_SEED repeats a run); fails on a lost
## acknowledgement, a read, view or table that is not its log at the end, a
## group that does not catch up, memory that grows. Figures in
## docs/RELIABILITY.md
DURATION ?= 1h
# Built without cgo, as every shipped binary is (make build, the image): the
# stores' memory is then Go heap, under the runtime's soft limit.
test-soak: deps tools
	CGO_ENABLED=0 OFFERLOG_SOAK_DURATION=$(DURATION) $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./cmd/offerlog/internal/platform/

## test-topology: the production topology at full length: every process the
## rendered manifests define, under load, every fault of the nemesis
## (OFFERLOG_TOPOLOGY_SEED repeats a run, OFFERLOG_TOPOLOGY_STATIC=0 runs
## dynamic group members); make test runs its short form. Figures in
## docs/RELIABILITY.md
test-topology: deps tools
	OFFERLOG_TOPOLOGY=full OFFERLOG_REQUIRE_ZOOKEEPER=1 \
		$(GO) test -count=1 -timeout 60m -v -run '^TestTopology$$' ./cmd/offerlog/

## bench: the benchmarks, figures and ratios to the ceilings of the same run,
## three runs and the median of each row (RUNS=1 for one)
# The bench is a module of its own (BENCH), not in the offerlog binary; the
# goka ceiling runs in a binary of its own, built beside offerlog-bench,
# where the bench looks for it. Without cgo, as what ships is built.
RUNS ?= 3
bench: deps
	cd $(BENCH) && CGO_ENABLED=0 $(GO) build -o $(CURDIR)/bin/offerlog-bench ./cmd/offerlog-bench
	cd $(BENCH) && CGO_ENABLED=0 $(GO) build -o $(CURDIR)/bin/goka-ceiling ./cmd/goka-ceiling
	bin/offerlog-bench --runs $(RUNS) $(ARGS)

## lint: gofmt, go vet and staticcheck
lint: deps
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@out=$$(gofmt -l $$(git ls-files '*.go' ':!third_party/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(MAKE) --no-print-directory vet
	@# upstream's code in third_party/forked keeps upstream's style
	$(GOBIN)/staticcheck $$($(GO) list ./... | grep -v /third_party/)
	cd $(BENCH) && $(GOBIN)/staticcheck ./...

## proto: regenerate the gRPC code of schemas/proto (the generated code is
## committed; only a change of a .proto needs this, and Debian's protoc)
proto:
	@command -v protoc >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq protobuf-compiler >/dev/null; }
	@test -x $(GOBIN)/protoc-gen-go || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@test -x $(GOBIN)/protoc-gen-go-grpc || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	cd schemas/proto && PATH="$(GOBIN):$$PATH" protoc -I . \
		--go_out=. --go_opt=module=github.com/offerlog/offerlog/schemas/proto \
		--go-grpc_out=. --go-grpc_opt=module=github.com/offerlog/offerlog/schemas/proto \
		$$(find . -name '*.proto')

## deps: Go modules
deps:
	@$(GO) mod download
	@cd $(BENCH) && $(GO) mod download

KAFKAJS = cmd/offerlog/internal/platform/testdata/kafkajs

## tools: Debian's kcat (the tests prove our topics are ordinary Kafka with it),
## prometheus (promtool: the alert rules' unit tests and the scrape config),
## zookeeper (the tests start servers of their own for the coordinators),
## chromium (the console is tested in a real headless browser) and, with
## npm, kafkajs (a test is a kafkajs user)
tools:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	[ -f /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
		echo "installing from Debian:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@# kafkajs and @kafkajs/confluent-schema-registry: another client and
	@# another Avro library, used by a test as a user would
	@[ -d $(KAFKAJS)/node_modules/kafkajs ] || npm ci --prefix $(KAFKAJS) --no-audit --no-fund --loglevel=error

clean:
	rm -rf bin data dist $(KAFKAJS)/node_modules
