#!/bin/sh
# Runs files of Nx's test suite with Emily.Compiler as the default defn
# compiler and Emily.Backend as the default backend; see scripts/nx_suite.exs.
#   scripts/nx_suite.sh [--failures] [nx/defn/grad_test.exs ...]
cd "$(dirname "$0")/.." && MIX_ENV=test exec mix run scripts/nx_suite.exs "$@"
