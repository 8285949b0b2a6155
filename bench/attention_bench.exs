# Scaled dot-product attention on the CPU: the fused engine kernel
# (Emily.Fast.Attention on Emily.Backend) against the same attention
# composed from Nx ops on Emily.Backend (eager, and jit under
# Emily.Compiler) and numpy (bench/attention_numpy.py, float32 always: it
# has no bf16), in one run. Times are ms per call, build + evaluate (the
# result stays in the engine), median over rounds of each round's median.
#
#   mix run bench/attention_bench.exs [rounds]
#
# decode_4k: one query token over 4096 cached keys, B=1, H=16, Hkv=8
#            (grouped-query), D=128, the cache a slice of a 4608-long buffer
#            (as a KV cache is read).
# prefill_512: 512 tokens attending causally to themselves, same heads.
alias Emily.Fast.Attention

Nx.default_backend(Emily.Backend)

rounds =
  case System.argv() do
    [n] -> String.to_integer(n)
    _ -> 3
  end

reps = 7

# {name, b, h, hkv, lq, lk, d, causal, cache capacity}
cases = [
  {"decode_4k", 1, 16, 8, 1, 4096, 128, false, 4608},
  {"prefill_512", 1, 16, 8, 512, 512, 128, true, 512}
]

types = [{:f, 32}, {:bf, 16}]

inputs = fn {_, b, h, hkv, lq, lk, d, _, cap}, type ->
  key = Nx.Random.key(7)
  {q, key} = Nx.Random.normal(key, shape: {b, h, lq, d}, type: :f32)
  {kc, key} = Nx.Random.normal(key, shape: {b, hkv, cap, d}, type: :f32)
  {vc, _} = Nx.Random.normal(key, shape: {b, hkv, cap, d}, type: :f32)

  [q, k, v] =
    Enum.map([q, kc[[.., .., 0..(lk - 1)]], vc[[.., .., 0..(lk - 1)]]], &Nx.as_type(&1, type))

  Enum.each([q, k, v], &Emily.eval(&1.data.ref))
  [q, k, v]
end

composed = fn q, k, v, causal ->
  {_, _, _, d} = q.shape
  struct = %Attention{scale: 1 / :math.sqrt(d), causal: causal}
  Attention.composed(struct, [q, k, v])
end

variants = fn causal ->
  fused = fn q, k, v -> Attention.scaled_dot_product_attention(q, k, v, causal: causal) end
  nx = fn q, k, v -> composed.(q, k, v, causal) end

  [
    {"fused", fused},
    {"composed", nx},
    {"composed_jit", Nx.Defn.jit(nx, compiler: Emily.Compiler)}
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
numpy_script = Path.join(__DIR__, "attention_numpy.py")

numpy_args =
  for {name, b, h, hkv, lq, lk, d, causal, _} <- cases,
      do: Enum.join([name, b, h, hkv, lq, lk, d, if(causal, do: 1, else: 0)], ":")

results =
  Enum.reduce(1..rounds, %{}, fn _round, acc ->
    acc =
      for c <- cases, type <- types, reduce: acc do
        acc ->
          [q, k, v] = inputs.(c, type)
          causal = elem(c, 7)

          for {variant, f} <- variants.(causal), reduce: acc do
            acc ->
              run = fn -> Emily.eval(f.(q, k, v).data.ref) end
              ms = time_ms.(run)
              Map.update(acc, {elem(c, 0), type, variant}, [ms], &[ms | &1])
          end
      end

    {text, 0} =
      System.cmd("/usr/bin/python3", [numpy_script | numpy_args],
        env: [{"BENCH_REPS", "#{reps}"}]
      )

    for line <- String.split(text, "\n", trim: true),
        ["R", name, "numpy", med | _] <- [String.split(line, "\t")],
        type <- types,
        reduce: acc do
      acc ->
        ms = String.to_float(med) * 1000
        Map.update(acc, {name, type, "numpy"}, [ms], &[ms | &1])
    end
  end)

# Sanity: the fused result agrees with the composed one.
for c <- cases do
  [q, k, v] = inputs.(c, {:f, 32})
  causal = elem(c, 7)
  a = Attention.scaled_dot_product_attention(q, k, v, causal: causal)
  b = composed.(q, k, v, causal)
  diff = Nx.subtract(a, b) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
  if diff > 1.0e-4, do: raise("#{elem(c, 0)}: fused and composed differ by #{diff}")
end

IO.puts(
  "# #{:erlang.system_info(:system_architecture)}, #{System.schedulers_online()} schedulers, " <>
    "#{DateTime.utc_now() |> DateTime.truncate(:second)}, rounds #{rounds}, reps #{reps}; ms per call; " <>
    "numpy is float32 in both rows"
)

cols = ~w(fused composed composed_jit numpy)

IO.puts(
  String.pad_trailing("case", 18) <>
    String.pad_trailing("type", 6) <>
    Enum.map_join(cols ++ ~w(composed/fused numpy/fused), "", &String.pad_leading(&1, 16))
)

for {name, _, _, _, _, _, _, _, _} <- cases, type <- types do
  [f, c, j, np] = Enum.map(cols, &median.(results[{name, type, &1}]))

  IO.puts(
    String.pad_trailing(name, 18) <>
      String.pad_trailing(Emily.Backend.Util.type_name(type), 6) <>
      Enum.map_join(
        [f, c, j, np, c / f, np / f],
        "",
        &String.pad_leading(:erlang.float_to_binary(&1 * 1.0, decimals: 3), 16)
      )
  )
end
