#!/usr/bin/env bash
# Set up .venv on a fresh machine: torch 2.13.0 (CPU build where no GPU), then this project.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"
