# Shared by the Elixir benchmarks: per-call timings in batches, and table rows.
defmodule BenchTiming do
  @doc """
  Runs `fun` `batch` times to warm up (allocator cache, worker thread), then
  `batches` timed batches; returns `{median, p10, p90}` in µs per call.
  """
  def measure(fun, batch, batches) do
    for _ <- 1..batch, do: fun.()

    samples =
      for _ <- 1..batches do
        start = System.monotonic_time(:nanosecond)
        for _ <- 1..batch, do: fun.()
        (System.monotonic_time(:nanosecond) - start) / batch / 1000
      end
      |> Enum.sort()

    at = fn q -> Enum.at(samples, min(length(samples) - 1, trunc(q * length(samples)))) end
    {at.(0.5), at.(0.1), at.(0.9)}
  end

  @doc "Prints `name` padded to `width`, then the three figures."
  def row(name, {median, p10, p90}, width) do
    IO.puts(
      String.pad_trailing(name, width) <>
        Enum.map_join(
          [median, p10, p90],
          "",
          &String.pad_leading(:erlang.float_to_binary(&1, decimals: 2), 10)
        )
    )
  end
end
