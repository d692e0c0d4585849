# tvolib: regenerate the figures of "GP Bandit Optimization of the TVO" (NeurIPS 2020).
#
#   make figures            set up .venv if needed, then run every notebook at PROFILE (default quick)
#   make figure-NN          one notebook: a prefix of its name, e.g. figure-04 or figure-fig4 (make help lists them)
#   make test               set up .venv if needed, then unit tests + every notebook under nbval at smoke
#
# Notebooks get their parameters through papermill's parameters cell (-p profile, -p executor,
# -p data_root); under `make test` nbval runs them as stored, and their None defaults read
# TVOLIB_PROFILE / TVOLIB_RESULTS / TVOLIB_FIGURES (set to the smoke profile and scratch folders).
#
# Variables (override on the command line, e.g. `make figures PROFILE=paper TVOLIB_DATA=/data`):
#   PROFILE      a profile of tvolib.paper.profiles: smoke | quick | gpu | paper  (default quick)
#   TVOLIB_DATA  dataset root; empty: ~/.cache/tvolib/data (`make figures` first downloads what is missing there)
#   TORCH_SPEC   the torch/torchvision pair to install      (default: the tested pair below)
#   TORCH_INDEX  extra pip options for torch, e.g. --index-url https://download.pytorch.org/whl/cpu
#   EXECUTOR     local | slurm                               (default local)
#   STACK        auto | on | off: train runs of one shape together (auto: on CUDA)  (default auto)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON      ?= python3
VENV        ?= .venv
PROFILE     ?= quick
EXECUTOR    ?= local
STACK       ?= $(or $(TVOLIB_STACK),auto)
export TVOLIB_STACK := $(STACK)
TORCH_SPEC  ?= torch==2.14.1 torchvision==0.29.1
TORCH_INDEX ?=
TVOLIB_DATA ?=
ifneq ($(strip $(TVOLIB_DATA)),)
# Notebooks run with notebooks/ as working directory: pass the data root as an absolute path.
override TVOLIB_DATA := $(abspath $(TVOLIB_DATA))
endif
export TVOLIB_DATA

PY         := $(VENV)/bin/python
PIP        := $(PY) -m pip
STAMP      := $(VENV)/.tvolib-installed
NOTEBOOKS  := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
EXECUTED   := notebooks/executed
TEST_TMP   ?= $(CURDIR)/.cache/test
# pytest-xdist workers for make test: auto is one per usable CPU, at most 4, plus one where Slurm is
# installed (conftest.py); 0 runs serially.
TEST_WORKERS ?= auto

FIGURE_TARGETS := $(addprefix figure-,$(patsubst notebooks/%.ipynb,%,$(NOTEBOOKS)))
# Where the notebooks write (tvolib.paths): $TVOLIB_FIGURES, else figures/ (the committed figures),
# except at the smoke profile, whose figures go to a scratch folder unless one is named.
FIGURES_OUT := $(or $(TVOLIB_FIGURES),$(if $(filter smoke,$(PROFILE)),.cache/figures-smoke,figures))
DATA_PARAM  := $(if $(strip $(TVOLIB_DATA)),-p data_root $(TVOLIB_DATA))
PAPERMILL   := $(PY) -m papermill --cwd notebooks --log-level WARNING

.PHONY: help setup data check-profile figures test unit lab strip clean distclean

help:
	@echo "make figures   # install into $(VENV) and regenerate every figure at PROFILE=$(PROFILE)"
	@echo "make test      # install into $(VENV) and run unit tests + notebooks (nbval, smoke profile)"
	@echo "make setup | data | unit | lab | strip | clean | distclean"
	@echo "one figure (a unique prefix also works, e.g. figure-04 or figure-fig4):"
	@for t in $(FIGURE_TARGETS); do echo "  make $$t"; done

setup: $(STAMP)

# pip byte-compiles what it installs (about 20 s more for torch). Do not pass --no-compile: where
# PYTHONDONTWRITEBYTECODE is set, as on CI machines, Python then never writes the .pyc files and
# every process (test worker, notebook kernel, pool worker, Slurm job) compiled torch's sources
# again: about 9 s of CPU per process that imports torch._dynamo (measured: 14 s cold, 5 s compiled).
$(STAMP): pyproject.toml requirements/constraints.txt
	@echo "==> creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	$(PYTHON) -m venv $(VENV)
	@echo "==> installing $(TORCH_SPEC) $(TORCH_INDEX)"
	$(PIP) install --quiet $(TORCH_INDEX) $(TORCH_SPEC)
	@echo "==> installing tvolib and pinned dependencies (requirements/constraints.txt)"
	$(PIP) install --quiet -c requirements/constraints.txt -e '.[notebooks,test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (tvolib)" >/dev/null
	@touch $@
	@echo "==> environment ready: $(VENV)"

data: setup
	@echo "==> checking datasets under $${TVOLIB_DATA:-~/.cache/tvolib/data} (downloading what is missing)"
	$(PY) -m tvolib.data --download

check-profile: setup
	@$(PY) -m tvolib.paper.profiles $(PROFILE) >/dev/null

# Every dataset is checked, and what is missing fetched, once by `data` before the first notebook:
# a missing dataset stops here rather than hours in, and the runs then only read (TVOLIB_DOWNLOAD=0),
# so all of them read the same files (a download retried by each run could fail for one and work for
# the next, and mix Omniglot's chardata.mat with its derived 28x28 set within one figure).
figures: check-profile data
	@echo "==> running $(words $(NOTEBOOKS)) notebooks at profile '$(PROFILE)' (executor $(EXECUTOR)); figures -> $(FIGURES_OUT)/"
	@mkdir -p $(EXECUTED) figures
	@for nb in $(NOTEBOOKS); do \
	  name=$$(basename $$nb); echo "==> $$name"; start=$$(date +%s); \
	  TVOLIB_DOWNLOAD=$${TVOLIB_DOWNLOAD:-0} $(PAPERMILL) $$nb $(EXECUTED)/$$name \
	    -p profile $(PROFILE) -p executor $(EXECUTOR) $(DATA_PARAM) || exit 1; \
	  echo "    done in $$(( $$(date +%s) - start )) s"; \
	done
	@echo "==> figures written to $(FIGURES_OUT)/ (executed notebooks in $(EXECUTED)/)"

# figure-<prefix>: the one notebook whose name, or whose stem after "NN_", starts with <prefix>.
figure-%: check-profile
	@want='$*'; found=""; \
	for nb in $(NOTEBOOKS); do b=$$(basename $$nb .ipynb); \
	  case "$$b" in "$$want"*|[0-9][0-9]_"$$want"*) found="$$found $$b";; esac; \
	done; \
	set -- $$found; \
	if [ $$# -ne 1 ]; then \
	  echo "error: figure-$$want matches $$# notebooks$${found:+ ($$found )}; targets:" >&2; \
	  for t in $(FIGURE_TARGETS); do echo "  $$t" >&2; done; exit 2; \
	fi; \
	mkdir -p $(EXECUTED) figures; echo "==> $$1 at profile '$(PROFILE)'"; \
	TVOLIB_DOWNLOAD=$${TVOLIB_DOWNLOAD:-1} $(PAPERMILL) notebooks/$$1.ipynb $(EXECUTED)/$$1.ipynb \
	  -p profile $(PROFILE) -p executor $(EXECUTOR) $(DATA_PARAM)

test: setup
	@echo "==> unit tests and notebooks (nbval) at the smoke profile; scratch results in $(TEST_TMP)"
	@rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	TVOLIB_PROFILE=smoke TVOLIB_RESULTS=$(TEST_TMP)/results TVOLIB_FIGURES=$(TEST_TMP)/figures \
	  $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --nbval notebooks tests

unit: setup
	$(PY) -m pytest tests

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

strip: setup
	@echo "==> stripping outputs from notebooks/*.ipynb"
	$(VENV)/bin/nbstripout $(NOTEBOOKS)

clean:
	@echo "==> removing executed notebooks, test scratch and caches (results/ is kept)"
	rm -rf $(EXECUTED) .cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +

distclean: clean
	@echo "==> removing $(VENV) and results/"
	rm -rf $(VENV) results
