# offerlog: `make run` starts the platform, `make test` checks it,
# `make bench` measures it. Missing tools are installed on first use.

GO          ?= go
STATICCHECK_VERSION ?= v0.8.2
GOBIN       := $(shell $(GO) env GOPATH)/bin
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TEST_FLAGS  ?= -race -shuffle=on -timeout 20m

.PHONY: run test bench lint deps tools build clean

## run: start the whole platform on the embedded broker (data in ./data)
run: deps
	$(GO) run ./cmd/offerlog dev

## build: build bin/offerlog
build: deps
	$(GO) build -o bin/offerlog ./cmd/offerlog

## test: vet, then every test with the race detector against real parts
test: deps tools
	$(GO) vet ./...
	OFFERLOG_REQUIRE_KCAT=1 OFFERLOG_REQUIRE_ZOOKEEPER=1 $(GO) test $(TEST_FLAGS) ./...

## bench: the benchmarks, figures and ratios to the ceilings of the same run
bench: deps
	$(GO) run ./cmd/offerlog bench

## lint: gofmt, go vet and staticcheck
lint: deps
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...

## deps: Go modules
deps:
	@$(GO) mod download

## tools: Debian's kcat (the tests prove our topics are ordinary Kafka with it)
## and zookeeper (the tests start servers of their own for the coordinators)
tools:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	[ -f /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	if [ -n "$$missing" ]; then \
		echo "installing from Debian:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

clean:
	rm -rf bin data
