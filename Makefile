# tvolib: regenerate the figures of "GP Bandit Optimization of the TVO" (NeurIPS 2020).
#
#   make figures            set up .venv if needed, then run every notebook at PROFILE (default quick)
#   make test               set up .venv if needed, then unit tests + every notebook under nbval at smoke
#
# Variables (override on the command line, e.g. `make figures PROFILE=paper TVOLIB_DATA=/data`):
#   PROFILE      smoke | quick | paper                      (default quick)
#   TVOLIB_DATA  dataset root; empty: ~/.cache/tvolib/data (`make figures` downloads what is missing there)
#   TORCH_SPEC   the torch/torchvision pair to install      (default: the tested pair below)
#   TORCH_INDEX  extra pip options for torch, e.g. --index-url https://download.pytorch.org/whl/cpu
#   EXECUTOR     local | slurm                               (default local)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON      ?= python3
VENV        ?= .venv
PROFILE     ?= quick
EXECUTOR    ?= local
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

FIGURE_TARGETS := $(addprefix figure-,$(patsubst notebooks/%.ipynb,%,$(NOTEBOOKS)))

.PHONY: help setup data figures $(FIGURE_TARGETS) test unit lab strip clean distclean

help:
	@echo "make figures   # install into $(VENV) and regenerate every figure at PROFILE=$(PROFILE)"
	@echo "make test      # install into $(VENV) and run unit tests + notebooks (nbval, smoke profile)"
	@echo "make setup | data | figure-NN_name | unit | lab | strip | clean | distclean"

setup: $(STAMP)

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

figures: setup
	@echo "==> running $(words $(NOTEBOOKS)) notebooks at profile '$(PROFILE)' (executor $(EXECUTOR)); figures -> figures/"
	@mkdir -p $(EXECUTED) figures
	@for nb in $(NOTEBOOKS); do \
	  name=$$(basename $$nb); echo "==> $$name"; start=$$(date +%s); \
	  TVOLIB_PROFILE=$(PROFILE) TVOLIB_EXECUTOR=$(EXECUTOR) TVOLIB_DOWNLOAD=$${TVOLIB_DOWNLOAD:-1} \
	    $(PY) -m papermill --cwd notebooks --log-level WARNING $$nb $(EXECUTED)/$$name \
	      -p profile $(PROFILE) -p executor $(EXECUTOR) || exit 1; \
	  echo "    done in $$(( $$(date +%s) - start )) s"; \
	done
	@echo "==> figures written to figures/ (executed notebooks in $(EXECUTED)/)"

$(FIGURE_TARGETS): figure-%: setup
	@mkdir -p $(EXECUTED) figures
	TVOLIB_PROFILE=$(PROFILE) TVOLIB_EXECUTOR=$(EXECUTOR) \
	  $(PY) -m papermill --cwd notebooks notebooks/$*.ipynb $(EXECUTED)/$*.ipynb -p profile $(PROFILE) -p executor $(EXECUTOR)

test: setup
	@echo "==> unit tests and notebooks (nbval) at the smoke profile; scratch results in $(TEST_TMP)"
	@rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	TVOLIB_PROFILE=smoke TVOLIB_RESULTS=$(TEST_TMP)/results TVOLIB_FIGURES=$(TEST_TMP)/figures \
	  $(PY) -m pytest --nbval tests notebooks

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
