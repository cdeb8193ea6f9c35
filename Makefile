# Holdfast. `make test` and `make demo` work on a fresh clone: they build .venv from the
# pinned requirements (and node_modules from package-lock.json where the CDK CLI is needed).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_REGION ?= us-east-1
CDK := node_modules/.bin/cdk
# pytest-xdist workers for `make test`: each test file runs whole on one worker, the files
# that share a synthesized CDK app on one (tests/conftest.py). 2 for a 2-core machine.
TEST_WORKERS ?= 2

.PHONY: test demo serve synth bench e2e dist clean

# Python writes the bytecode of what it imports (into .venv and the tree's __pycache__,
# both ignored by git) even where the shell sets PYTHONDONTWRITEBYTECODE: else every
# process started here (pytest's workers, the console script, `make serve`) would compile
# all it imports again.
export PYTHONDONTWRITEBYTECODE :=

# The venv's own pip (23.2 with Python 3.11) first replaced by a pinned newer one: resolving
# requirements-dev.txt reads every file of each project's index page (about 120,000 links,
# thousands for botocore, regex, pydantic-core) and 23.2 spent 40 of its 50 s of CPU there;
# 26.3 takes about a third of that.
PIP := pip==26.3
# --no-compile: nothing is byte-compiled at install; each module is compiled when first
# imported, and written. The suite imports about a fifth of what is installed (most of
# aws_cdk's service modules, sympy and matplotlib never): compiling all of .venv/lib
# (compileall -j 0) took 36 s on 2 cores, the modules the suite imports about 13 s of CPU.
# --no-build-isolation: the editable install builds with the setuptools just installed
# from requirements-dev.txt instead of installing setuptools again into a throwaway environment.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check $(PIP)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-compile -r requirements-dev.txt
	$(VENV)/bin/pip uninstall -q -y holdfast 2>/dev/null || true   # the distribution's name before holdfast-aws
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-compile --no-build-isolation --no-deps -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# What the suite imports compiled first, on every core, instead of by pytest's first process
# and then by each of its workers at once as they start (on a fresh clone both workers
# compiled the same sources side by side: 19 s of CPU each in collection alone): the tree's
# own modules, the installed packages both workers import, and the aws_cdk modules
# Holdfast's stacks import (aws_cdk has 180 MB of sources; these are 25 MB of it). A module
# missing here is compiled when first imported, as before; a file a package ships that does
# not compile (a test fixture, a template) stops nothing: the warm-up's result is not checked.
WARM_PACKAGES := moto botocore boto3 _pytest pluggy hypothesis xdist execnet werkzeug flask jsii \
	aws_lambda_powertools cdk_nag constructs s3transfer
WARM_CDK := aws_ec2 aws_lambda aws_s3 aws_cloudwatch aws_dynamodb aws_logs aws_iam aws_events aws_ssm \
	aws_cloudformation interfaces/aws_ec2 aws_kinesis aws_applicationautoscaling cloud_assembly_schema \
	aws_arcregionswitch aws_sns aws_sqs aws_events_targets aws_kms cx_api aws_chatbot
SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

test: $(VENV)/.installed
	$(VENV)/bin/ruff check --no-cache .
	PYTHONPATH=functions:stacks:dev $(VENV)/bin/lint-imports --no-cache
	$(PY) -m compileall -q -j 0 functions stacks dev
	-($(PY) -m compileall -q $(SITE)/aws_cdk/__init__.py $(foreach m,$(WARM_CDK),$(SITE)/aws_cdk/$(m)/__init__.py) & \
	  $(PY) -m compileall -q -j 0 $(addprefix $(SITE)/,$(WARM_PACKAGES)); wait) > /dev/null 2>&1
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

demo: $(VENV)/.installed
	PYTHONPATH=dev $(PY) -m holdfast_demo

# A local AWS with a sample fleet for the CLI; prints the `export` lines, Ctrl-C stops it.
# PORT=5001 make serve: another port (macOS keeps 5000 busy); PORT=0: any free one.
PORT ?= 5000
serve: $(VENV)/.installed
	PYTHONPATH=dev $(PY) -m holdfast_demo.serve --port $(PORT)

# The release: dist/holdfast_aws-<version>-py3-none-any.whl and .tar.gz, built from the
# tree with the pinned build tools (no download), timestamps from the last commit so that
# the same commit builds the same bytes, checked as the package index checks them, and
# their SHA-256 printed (a team pins the wheel by it: README.md, Quick start).
dist: $(VENV)/.installed
	rm -rf dist
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(PY) -m build --no-isolation --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	cd dist && sha256sum *

synth: $(VENV)/.installed node_modules/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(CDK) synth --no-notices --quiet
	@echo "templates in cdk.out/"

bench: $(VENV)/.installed
	$(PY) -m pytest -m benchmark -s

# Against a real sandbox account; never part of `make test`. Without HOLDFAST_E2E_ACCOUNT,
# HOLDFAST_E2E_REGION and AWS_PROFILE it prints one line and exits 0 (docs/testing.md: End-to-end run).
e2e:
	@bash tests/e2e/run.sh

clean:
	rm -rf $(VENV) node_modules cdk.out out dist
