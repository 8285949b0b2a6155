# Every test of Nx's and Axon's suites that test/nx_suite/run.exs does not
# run, with the reason; and the Nx doctests that test/nx/nx_doctest_test.exs
# does not run. Keys: a file of the suite (relative to its test/ directory)
# for the whole file, or {file, "describe name"} (ExUnit's test name
# without the leading "test ") for one test. Values: {category, reason};
# categories:
#   :internals     about Nx.BinaryBackend's or Nx.Defn.Evaluator's own
#                  workings, not about results (not counted in the target)
#   :nx_differs    Nx.BinaryBackend's answer is itself off; Emily's is right
#   :rounding      the test compares floats exactly; Emily is 1 ulp away
#   :neg_zero      -0.0 vs 0.0 (OTP 25 pattern matching tells them apart)
#   :unsupported   inherently unsupported by Emily (sub-byte, f8 types)
#   :binary_specific  behaviour specific to Nx.BinaryBackend
#   :engine        an engine bug, reported
#   :duplicate     run elsewhere in the project
%{
  nx: %{},
  axon: %{}
}
