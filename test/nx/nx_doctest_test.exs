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
  # the last digit (shown), -0.0 vs 0.0, inherently unsupported by Emily,
  # Nx.BinaryBackend itself is wrong (the doctest shows its answer).
  @excluded %{}

  @excluded_keys Map.keys(@excluded)

  doctest Nx, except: @excluded_keys
  doctest Nx.LinAlg, except: @excluded_keys
  doctest Nx.Random, except: @excluded_keys
  doctest Nx.Constants, except: @excluded_keys
end
