for file <- ~w(gen compare reference cases runner) do
  Code.require_file("../../support/differential/#{file}.exs", __DIR__)
end

defmodule Emily.Backend.DifferentialTest do
  @moduledoc """
  Seeded differential test: random calls over the Nx API, run on
  Nx.BinaryBackend and on Emily.Backend, compared with type-aware
  tolerances (see test/support/differential/).

      mix test test/emily/backend/differential_test.exs           # CI size
      EMILY_DIFF_SEED=7 EMILY_DIFF_CALLS=20000 mix test ...        # long run
      EMILY_DIFF_SEED=7 EMILY_DIFF_ONLY=1234 mix test ...          # replay one call
      EMILY_DIFF_FROM=10000 EMILY_DIFF_CALLS=5000 mix test ...     # a piece of a long run
      EMILY_DIFF_STATS=1 EMILY_DIFF_REPORT=/tmp/diff.txt ...       # coverage; every failure to a file
  """
  use ExUnit.Case, async: true

  alias EmilyTest.Differential

  @default_seed 20_260_101
  # About 10 s on one core.
  @default_calls 8000

  # Calls whose answer Nx leaves undefined, skipped (each: the function and a
  # predicate on the call). all/any with nothing to reduce (a scalar, or
  # axes: []) are `Nx.as_type(t, :u8)` in Nx's front-end, not a test of
  # x != 0: all(f16 -2.5) converts -2.5 to u8, which is undefined out of
  # range (BinaryBackend wraps to 254, Emily saturates to 0; see the
  # as_type case in cases.exs).
  defp undefined_in_nx,
    do: [
      {"Nx.all", &no_reduced_axes?/1},
      {"Nx.any", &no_reduced_axes?/1}
    ]

  defp no_reduced_axes?(call), do: hd(call.args).shape == {} or call.opts[:axes] == []

  defp env_int(name, default) do
    case System.get_env(name) do
      nil -> default
      value -> String.to_integer(value)
    end
  end

  defp undefined?(call),
    do: Enum.any?(undefined_in_nx(), fn {name, pred} -> call.name == name and pred.(call) end)

  @tag timeout: :infinity
  test "Emily.Backend agrees with Nx.BinaryBackend on random calls" do
    seed = env_int("EMILY_DIFF_SEED", @default_seed)

    indices =
      case System.get_env("EMILY_DIFF_ONLY") do
        nil ->
          from = env_int("EMILY_DIFF_FROM", 0)
          from..(from + env_int("EMILY_DIFF_CALLS", @default_calls) - 1)//1

        only ->
          only |> String.split(",") |> Enum.map(&String.to_integer/1)
      end

    {failures, counts} = Differential.run(seed, indices, &undefined?/1)

    if System.get_env("EMILY_DIFF_STATS") do
      IO.puts(
        "\n#{map_size(counts)} functions drawn over #{Enum.count(indices)} calls (seed #{seed})"
      )
    end

    # Every failure, for a long run (the assertion shows the first 20).
    if path = System.get_env("EMILY_DIFF_REPORT"),
      do: File.write!(path, Enum.join(failures, "\n"))

    assert failures == [],
           "#{length(failures)} of #{Enum.count(indices)} calls differ (seed #{seed}):\n\n" <>
             Enum.join(Enum.take(failures, 20), "\n")
  end
end
