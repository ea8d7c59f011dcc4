# Logbook — the test pyramid as make targets.
GO        ?= go
PROTOC    ?= protoc
PKGS      := ./...

.PHONY: test e2e bench fuzz proto verify build images

## test: unit and in-process cluster tests, race detector on (the README's test command).
test:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## e2e: docker compose end-to-end and fault tests (builds the images first).
e2e:
	bash tests/e2e/run.sh

## bench: Go benchmarks with printed figures (no timed assertions).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## fuzz: short fuzzing runs of the parsers.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzReadSnapshot -fuzztime 30s ./fsm
	$(GO) test -run '^$$' -fuzz FuzzReadMeta -fuzztime 20s ./replica
	$(GO) test -run '^$$' -fuzz FuzzLoadRbw -fuzztime 20s ./replica
	$(GO) test -run '^$$' -fuzz FuzzPacketValidation -fuzztime 20s -fuzzminimizetime 100x ./internal/nodeserver
	$(GO) test -run '^$$' -fuzz FuzzPlanRecovery -fuzztime 20s ./leaserecovery
	$(GO) test -run '^$$' -fuzz FuzzParseBearer -fuzztime 20s ./internal/authz
	$(GO) test -run '^$$' -fuzz FuzzValidateRole -fuzztime 20s ./internal/authz
	$(GO) test -run '^$$' -fuzz FuzzVerify -fuzztime 20s ./internal/blocktoken
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 20s ./internal/blocktoken

## proto: regenerate the Go code of every .proto file (protoc, protoc-gen-go, protoc-gen-go-grpc):
## the client API (api/logbookv1), the log and snapshot formats (fsm/fsmpb, messages only)
## and the cluster-internal services (internal/clusterpb).
PROTO_GO := --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative
proto:
	cd api && $(PROTOC) -I . $(PROTO_GO) logbookv1/*.proto
	$(PROTOC) -I . --go_out=. --go_opt=paths=source_relative fsm/fsmpb/*.proto
	$(PROTOC) -I . -I api $(PROTO_GO) internal/clusterpb/*.proto

## verify: formatting, vet, and generated code up to date.
verify:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet $(PKGS)
	@if command -v $(PROTOC) >/dev/null && command -v protoc-gen-go >/dev/null && command -v protoc-gen-go-grpc >/dev/null; then \
		$(MAKE) -s proto && git diff --exit-code -- api/ fsm/fsmpb/ internal/clusterpb/ || { echo "generated code is stale: run make proto"; exit 1; }; \
	else echo "verify: protoc or plugins missing, generated-code check skipped"; fi

## build: static binaries into bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/coord ./cmd/coord
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/node ./cmd/node

## images: the FROM-scratch compose images.
images:
	bash deploy/compose/build.sh
