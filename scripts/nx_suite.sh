#!/bin/sh
# Runs files of Nx's test suite with Emily.Compiler as the default defn
# compiler and Emily.Backend as the default backend; see scripts/nx_suite.exs.
#   scripts/nx_suite.sh [--failures] [nx/defn/grad_test.exs ...]
# A hard time limit (NX_SUITE_TIMEOUT seconds, default 1800): a test stuck
# inside a NIF ignores SIGTERM.
cd "$(dirname "$0")/.." && MIX_ENV=test exec timeout -s KILL "${NX_SUITE_TIMEOUT:-1800}" mix run scripts/nx_suite.exs "$@"
