#!/bin/sh
# Nx's (or Axon's) own test files, from ../shared/vendor, run on Emily; a
# table per file of tests, passes, failures and exclusions (with reasons).
#   scripts/nx_oracle.sh backend|compiler|binary [--suite nx|axon] [--failures]
#     [--trace] [--skip NAME] [--timeout S] [--binary-default] [FILE ...]
# See test/nx_suite/run.exs; exclusions are in test/nx_suite/exclusions.exs.
# The runner ends a file that runs past --timeout itself; SIGKILL after
# NX_ORACLE_TIMEOUT seconds (default 3600) is the last resort, for a VM
# that cannot even halt.
cd "$(dirname "$0")/.." && MIX_ENV=test exec timeout -s KILL "${NX_ORACLE_TIMEOUT:-3600}" mix run test/nx_suite/run.exs "$@"
