# Issue #5 bench (b): an 8-op elementwise chain on 16M f32 through the
# Elixir API, eager Nx on Emily.Backend vs Emily.Compiler vs Emily.Compiler (fuse: true), and numpy on
# the same expressions in the same run (bench/fusion_numpy.py, alternated
# with the Elixir rounds). Times are ms per call, build + evaluate (the
# result stays in the engine), median over rounds of each round's median.
#
#   mix run bench/chain_bench.exs [rounds]
#
# chain8: tanh(exp(-(x*a + b)^2) * c - x)         (exp and tanh dominate)
# cheap8: max(|(x*a + b)^2 * c - x|, x) / c        (memory-bound unfused)
Nx.default_backend(Emily.Backend)

rounds =
  case System.argv() do
    [n] -> String.to_integer(n)
    _ -> 3
  end

reps = 7
n = 16 * 1024 * 1024
{x, _} = Nx.Random.uniform(Nx.Random.key(1), -2.0, 2.0, shape: {n}, type: {:f, 32})
Emily.eval(x.data.ref)
[a, b, c] = Enum.map([0.7, 0.1, 1.3], &Nx.tensor(&1, type: {:f, 32}))

chains = %{
  "chain8_16M_f32" => fn x, a, b, c ->
    t = Nx.add(Nx.multiply(x, a), b)
    t |> Nx.multiply(t) |> Nx.negate() |> Nx.exp() |> Nx.multiply(c) |> Nx.subtract(x) |> Nx.tanh()
  end,
  "cheap8_16M_f32" => fn x, a, b, c ->
    t = Nx.add(Nx.multiply(x, a), b)
    t |> Nx.multiply(t) |> Nx.multiply(c) |> Nx.subtract(x) |> Nx.abs() |> Nx.max(x) |> Nx.divide(c)
  end
}

variants = fn fun ->
  [
    {"eager", fun},
    {"jit", Nx.Defn.jit(fun, compiler: Emily.Compiler)},
    {"jit+fuse", Nx.Defn.jit(fun, compiler: Emily.Compiler, fuse: true)}
  ]
end

time_ms = fn f ->
  f.()

  samples =
    for _ <- 1..reps do
      t0 = System.monotonic_time(:microsecond)
      f.()
      (System.monotonic_time(:microsecond) - t0) / 1000
    end

  Enum.at(Enum.sort(samples), div(reps, 2))
end

median = fn list -> Enum.at(Enum.sort(list), div(length(list), 2)) end
numpy_script = Path.join(__DIR__, "fusion_numpy.py")

results =
  Enum.reduce(1..rounds, %{}, fn _round, acc ->
    acc =
      Enum.reduce(chains, acc, fn {name, fun}, acc ->
        Enum.reduce(variants.(fun), acc, fn {variant, f}, acc ->
          run = fn ->
            out = f.(x, a, b, c)
            Emily.eval(out.data.ref)
          end

          Map.update(acc, {name, variant}, [time_ms.(run)], &[time_ms.(run) | &1])
        end)
      end)

    {text, 0} =
      System.cmd("/usr/bin/python3", [numpy_script], env: [{"BENCH_REPS", "#{reps}"}])

    for line <- String.split(text, "\n", trim: true),
        ["R", name, "numpy", med | _] <- [String.split(line, "\t")],
        Map.has_key?(chains, name),
        reduce: acc do
      acc ->
        ms = String.to_float(med) * 1000
        Map.update(acc, {name, "numpy"}, [ms], &[ms | &1])
    end
  end)

IO.puts(
  "# #{:erlang.system_info(:system_architecture)}, #{System.schedulers_online()} schedulers, " <>
    "#{DateTime.utc_now() |> DateTime.truncate(:second)}, rounds #{rounds}, reps #{reps}"
)

IO.puts(
  String.pad_trailing("case", 18) <>
    Enum.map_join(
      ~w(eager jit jit+fuse numpy eager/fused numpy/fused),
      "",
      &String.pad_leading(&1, 12)
    )
)

for name <- Enum.sort(Map.keys(chains)) do
  [e, j, f, np] = Enum.map(~w(eager jit jit+fuse numpy), &median.(results[{name, &1}]))
  cells = [e, j, f, np, e / f, np / f]

  IO.puts(
    String.pad_trailing(name, 18) <>
      Enum.map_join(cells, "", &String.pad_leading(:erlang.float_to_binary(&1, decimals: 2), 12))
  )
end
