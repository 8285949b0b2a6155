defmodule Emily.NxDoctestTest do
  @moduledoc """
  Nx's own doctests, run with Emily.Backend as the default backend: the
  oracle of the backend. Every exclusion is listed in `@excluded` with its
  reason.
  """
  use ExUnit.Case, async: false

  setup do
    previous = Nx.default_backend(Emily.Backend)
    on_exit(fn -> Nx.default_backend(previous) end)
    :ok
  end

  # function/arity => why it is excluded. Reasons are one of: rounding in
  # the last digit (shown as Emily vs the doctest), -0.0 vs 0.0,
  # inherently unsupported by Emily, Nx.BinaryBackend itself differs (the
  # doctest shows its answer). ExUnit excludes whole functions, so the
  # other doctests of these functions do not run either.
  @f8 "inherently unsupported: an f8 (E5M2) example; Emily has no 8-bit floats"
  @excluded %{
    # Types the engine does not have.
    {:tensor, 2} => "inherently unsupported: f8 and f8_e4m3fn examples",
    {:bit_size, 1} => "inherently unsupported: a u2 example (sub-byte integers)",
    {Nx.Constants, :e, 2} => @f8,
    {Nx.Constants, :epsilon, 2} => @f8,
    {Nx.Constants, :euler_gamma, 2} => @f8,
    {Nx.Constants, :infinity, 2} => @f8,
    {Nx.Constants, :nan, 2} => @f8,
    {Nx.Constants, :neg_infinity, 2} => @f8,
    {Nx.Constants, :pi, 2} => @f8,
    {Nx.Constants, :smallest_positive_normal, 2} => @f8,
    # f64 math: last-digit rounding, or the binary backend's approximation.
    {:cbrt, 1} => "rounding in the last digit: cbrt(2.0) f64 1.2599210498948734 vs 1.2599210498948732",
    {:log1p, 1} => "rounding in the last digit: log1p(2.0) f64 1.0986122886681096 vs 1.0986122886681098",
    {:erf_inv, 1} =>
      "Nx.BinaryBackend differs: its f64 erf_inv is Giles' approximation, good to ~1e-8 " <>
        "(erf_inv(0.1) = 0.08885599049425769, the doctest says 0.08885598780483887)",
    # Linear algebra: LAPACK's rounding vs Nx's own iterations.
    {Nx.LinAlg, :cholesky, 1} => "rounding in the last digit: [2.1213202, 0.7071071] vs [2.1213205, 0.7071065]",
    {Nx.LinAlg, :determinant, 1} =>
      "rounding in the last digit: 48.0 vs 47.999996 and 630.0 vs 630.00006 (LU in f64 is exact here); " <>
        "-0.0 vs 0.0: the complex example's real part is 0.0 vs -0.0",
    {Nx.LinAlg, :eigh, 2} =>
      "rounding in the last digit: 0.8280673 vs 0.8280672; Nx.BinaryBackend differs: the 3x3 " <>
        "example has a double eigenvalue -1, whose eigenvectors are any orthonormal basis of its plane",
    {Nx.LinAlg, :least_squares, 3} => "rounding in the last digit: [1.0, -0.95000035] vs [1.0000001, -0.95000035]",
    {Nx.LinAlg, :lu, 1} => "rounding in the last digit: p·l·u gives 4.0 and 1.0 vs 3.9999998 and 0.9999999",
    {Nx.LinAlg, :matrix_power, 2} =>
      "Nx.BinaryBackend differs: iota({2, 2, 2}) ** -3 is exactly -110.375 (Emily) vs -110.37471",
    {Nx.LinAlg, :pinv, 2} => "rounding in the last digit: 1.0 vs 0.99999994",
    {Nx.LinAlg, :qr, 2} => "rounding in the last digit: r[2][2] 1.4142135 vs 1.4142137",
    {Nx.LinAlg, :solve, 2} => "rounding in the last digit: [1.0000001, -2.0000002, ...] vs [1.0, -2.0, ...]",
    {Nx.LinAlg, :svd, 2} => "rounding in the last digit: u[0][1] 1.0 vs 0.99999994",
    {Nx.LinAlg, :triangular_solve, 3} =>
      "inherently unsupported: the singular-matrix error is raised when the lazy result " <>
        "is read, not by the call"
  }

  # `doctest` takes the excluded functions of one module as name/arity.
  # EMILY_NX_DOCTEST_ALL=1 runs every doctest, to count what the
  # exclusions hide.
  excluded_in = fn module ->
    for {key, _reason} <- @excluded,
        System.get_env("EMILY_NX_DOCTEST_ALL") != "1",
        {^module, name, arity} <- [if(tuple_size(key) == 2, do: Tuple.insert_at(key, 0, Nx), else: key)],
        do: {name, arity}
  end

  doctest Nx, except: excluded_in.(Nx)
  doctest Nx.LinAlg, except: excluded_in.(Nx.LinAlg)
  doctest Nx.Random, except: excluded_in.(Nx.Random)
  doctest Nx.Constants, except: excluded_in.(Nx.Constants)

  test "every exclusion names a function that exists" do
    for {key, reason} <- @excluded do
      {module, name, arity} =
        case key do
          {name, arity} -> {Nx, name, arity}
          {module, name, arity} -> {module, name, arity}
        end

      assert function_exported?(module, name, arity), "#{inspect(key)} (#{reason})"
    end
  end
end
