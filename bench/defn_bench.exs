# Per-call cost of a small defn seen from Elixir: Emily.Compiler's replay
# (template lookup, argument flattening, one program_run NIF call) against
# eager Emily.Backend (the same ops called one by one) and Nx.Defn.Evaluator
# on Nx.BinaryBackend, for `a * b + 1` on f32[4] and a 10-op chain on
# f32[1024]. Results are not read (every path returns lazy or computed
# tensors as it would to a caller); a second table reads them
# (Nx.to_binary), which adds evaluation.
#
#   MIX_ENV=test mix run bench/defn_bench.exs [calls]

defmodule DefnBench do
  import Nx.Defn

  defn small(a, b), do: a * b + 1

  defn chain(a, b) do
    x = a * b + 1
    x = Nx.exp(x) - Nx.tanh(b)
    x = x / (Nx.abs(a) + 1)
    Nx.sum(Nx.sin(x) * 2 + x, axes: [0])
  end

  # Median microseconds per call of fun over `calls` calls (after warm-up),
  # and the 10th-90th percentile range.
  def measure(fun, calls) do
    for _ <- 1..200, do: fun.()

    times =
      for _ <- 1..calls do
        t0 = System.monotonic_time(:nanosecond)
        fun.()
        System.monotonic_time(:nanosecond) - t0
      end
      |> Enum.sort()

    at = fn q -> Enum.at(times, min(length(times) - 1, trunc(q * length(times)))) / 1000 end
    {at.(0.5), at.(0.1), at.(0.9)}
  end
end

calls = String.to_integer(List.first(System.argv()) || "20000")

cases = [
  {"a * b + 1, f32[4]", &DefnBench.small/2, {4}},
  {"10-op chain + sum, f32[64,16]", &DefnBench.chain/2, {64, 16}}
]

rows =
  for {label, fun, shape} <- cases do
    {a, _} = Nx.Random.uniform(Nx.Random.key(1), shape: shape, type: :f32)
    {b, _} = Nx.Random.uniform(Nx.Random.key(2), shape: shape, type: :f32)
    ea = Nx.backend_copy(a, Emily.Backend)
    eb = Nx.backend_copy(b, Emily.Backend)
    ba = Nx.backend_copy(a, Nx.BinaryBackend)
    bb = Nx.backend_copy(b, Nx.BinaryBackend)

    compiled = Nx.Defn.jit(fun, compiler: Emily.Compiler)
    unfused = Nx.Defn.jit(fun, compiler: Emily.Compiler, fuse: false)
    eager = Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator)

    paths = [
      {"Emily.Compiler replay", fn -> compiled.(ea, eb) end},
      {"Emily.Compiler replay, fuse: false", fn -> unfused.(ea, eb) end},
      {"eager Emily.Backend (Evaluator)", fn -> eager.(ea, eb) end},
      {"Nx.Defn.Evaluator, BinaryBackend", fn -> eager.(ba, bb) end}
    ]

    for {name, f} <- paths do
      binary_calls = if String.contains?(name, "BinaryBackend"), do: div(calls, 10), else: calls
      {build, _, _} = DefnBench.measure(f, binary_calls)
      {read, lo, hi} = DefnBench.measure(fn -> Nx.to_binary(f.()) end, div(binary_calls, 2))
      {label, name, build, read, lo, hi}
    end
  end
  |> Enum.concat()

IO.puts("Nx.Defn per-call cost, median µs over #{calls} calls (#{System.schedulers_online()} schedulers)\n")
IO.puts("| function | path | call (lazy result) | call + read | read p10–p90 |")
IO.puts("| --- | --- | ---: | ---: | ---: |")

for {label, name, build, read, lo, hi} <- rows do
  fmt = &:erlang.float_to_binary(&1, decimals: 1)
  IO.puts("| #{label} | #{name} | #{fmt.(build)} | #{fmt.(read)} | #{fmt.(lo)}–#{fmt.(hi)} |")
end
