#!/usr/bin/env bash
# Checks the Prometheus rules and runs their unit tests (needs promtool: Debian package prometheus).
set -euo pipefail
cd "$(dirname "$0")/prometheus"
promtool check rules rules.yml
promtool test rules rules_test.yml
