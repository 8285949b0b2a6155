#!/bin/sh
# Nx's (or Axon's) own test files, from ../shared/vendor, run on Emily; a
# table per file of tests, passes, failures and exclusions (with reasons).
#   scripts/nx_oracle.sh backend|compiler|binary [--suite nx|axon] [--failures] [FILE ...]
# See test/nx_suite/run.exs; exclusions are in test/nx_suite/exclusions.exs.
cd "$(dirname "$0")/.." && MIX_ENV=test exec mix run test/nx_suite/run.exs "$@"
