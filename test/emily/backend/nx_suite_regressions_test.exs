defmodule Emily.Backend.NxSuiteRegressionsTest do
  @moduledoc """
  Bugs of Emily.Backend found by running Nx's own test suite on it
  (scripts/nx_oracle.sh), one describe per class of bug.
  """
  use ExUnit.Case, async: true

  defp emily(data, opts \\ []), do: Nx.tensor(data, Keyword.put(opts, :backend, Emily.Backend))

  defp close?(a, b, tol \\ 1.0e-4), do: Nx.all_close(a, b, atol: tol, rtol: tol) |> Nx.to_number() == 1

  describe "complex eigenvector phases" do
    # The phase normalisation compared complex entries with `less`, which
    # the engine rejects for complex types (Nx's lin_alg_test "eigh
    # properties" with c64).
    @hermitian [
      [1, Complex.new(0, 2), 2],
      [Complex.new(0, -2), -3, Complex.new(0, 2)],
      [2, Complex.new(0, -2), 1]
    ]

    test "eigh of a Hermitian matrix: each eigenvector's largest entry is real and positive" do
      a = emily(@hermitian)
      {w, v} = Nx.LinAlg.eigh(a)

      assert close?(Nx.dot(a, v), Nx.multiply(v, w))
      assert close?(w, emily([-5, 3, 1], type: :c64))

      # Nx's own answer for this matrix (lin_alg_test.exs), phases included.
      expected = [
        [Complex.new(0, -0.4082), 0.7071, 0.5773],
        [0.8164, 0, Complex.new(0, -0.5773)],
        [Complex.new(0, 0.4082), 0.7071, -0.5773]
      ]

      assert close?(v, emily(expected, type: :c64), 1.0e-3)
    end
  end
end
