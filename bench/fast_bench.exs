# Emily.Fast bench: rms_norm, layer_norm, softmax (and rope) over large rows, the
# fused native kernel against the composed Nx formula on Emily (eager, and
# under Emily.Compiler), and against the memory-copy rate measured in the
# same run. Figures are GB/s of the bytes each op must move at least (one
# read of x, one write of the result), median of `reps` calls, build +
# evaluate (the result stays in the engine). The target: the fused kernels
# at >= 80% of the copy rate. numpy's figures on the same machine:
# bench/fast_bench.py.
#
#   mix run bench/fast_bench.exs [reps]
Nx.default_backend(Emily.Backend)

reps =
  case System.argv() do
    [n] -> String.to_integer(n)
    _ -> 9
  end

eval! = fn %Nx.Tensor{data: %Emily.Backend{ref: ref}} = t ->
  Emily.eval(ref)
  t
end

time_s = fn f ->
  f.()

  samples =
    for _ <- 1..reps do
      t0 = System.monotonic_time(:nanosecond)
      f.()
      (System.monotonic_time(:nanosecond) - t0) / 1.0e9
    end

  Enum.at(Enum.sort(samples), div(reps, 2))
end

# The composed formulas (Emily.Fast's fallbacks: f32 inside, cast back).
composed = %{
  rms_norm: fn x, w ->
    xf = Nx.as_type(x, :f32)
    r = Nx.rsqrt(Nx.add(Nx.mean(Nx.multiply(xf, xf), axes: [-1], keep_axes: true), 1.0e-6))
    Nx.multiply(Nx.multiply(xf, r), w) |> Nx.as_type(x.type)
  end,
  layer_norm: fn x, w ->
    xf = Nx.as_type(x, :f32)
    xc = Nx.subtract(xf, Nx.mean(xf, axes: [-1], keep_axes: true))
    var = Nx.mean(Nx.multiply(xc, xc), axes: [-1], keep_axes: true)

    Nx.multiply(Nx.multiply(xc, Nx.rsqrt(Nx.add(var, 1.0e-5))), w)
    |> Nx.add(w)
    |> Nx.as_type(x.type)
  end,
  softmax: fn x, _w ->
    xf = Nx.as_type(x, :f32)
    e = Nx.exp(Nx.subtract(xf, Nx.reduce_max(xf, axes: [-1], keep_axes: true)))
    Nx.divide(e, Nx.sum(e, axes: [-1], keep_axes: true)) |> Nx.as_type(x.type)
  end
}

# RoPE (HF half rotation, all of head_dim 128, offset 0) on x viewed as
# {1, 32, seq, 128}.
rope_view = fn x ->
  {rows, cols} = x.shape
  Nx.reshape(x, {1, 32, div(rows * cols, 32 * 128), 128})
end

composed_rope = fn x, _w ->
  x = rope_view.(x)
  seq = elem(x.shape, 2)
  inv = Nx.pow(10_000.0, Nx.divide(Nx.multiply(Nx.iota({64}, type: :f32), -2), 128))
  theta = Nx.outer(Nx.iota({seq}, type: :f32), inv)
  {c, s} = {Nx.cos(theta), Nx.sin(theta)}
  xf = Nx.as_type(x, :f32)
  a = Nx.slice_along_axis(xf, 0, 64, axis: -1)
  b = Nx.slice_along_axis(xf, 64, 64, axis: -1)

  Nx.concatenate(
    [
      Nx.subtract(Nx.multiply(a, c), Nx.multiply(b, s)),
      Nx.add(Nx.multiply(a, s), Nx.multiply(b, c))
    ],
    axis: -1
  )
  |> Nx.as_type(x.type)
end

composed = Map.put(composed, :rope, composed_rope)

fused = %{
  rope: fn x, _w -> Emily.Fast.rope(rope_view.(x), 0, dims: 128) end,
  rms_norm: fn x, w -> Emily.Fast.rms_norm(x, w) end,
  layer_norm: fn x, w -> Emily.Fast.layer_norm(x, w, w) end,
  softmax: fn x, _w -> Emily.Fast.softmax(x) end
}

shapes = [{4096, 4096}, {32768, 512}]
types = [{:f, 32}, {:bf, 16}]

IO.puts("### Emily.Fast row kernels, GB/s (read x + write y), median of #{reps}\n")

IO.puts(
  "| op | shape | type | fused | fused % of copy | composed eager | composed Emily.Compiler | fused / composed |"
)

IO.puts("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")

for shape <- shapes, type <- types do
  {rows, cols} = shape
  {x, _} = Nx.Random.uniform(Nx.Random.key(42), -3.0, 3.0, shape: shape, type: :f32)
  x = x |> Nx.as_type(type) |> eval!.()
  w = Nx.broadcast(Nx.tensor(1.0, type: type), {cols}) |> Nx.add(0) |> eval!.()
  bytes = 2 * rows * cols * elem(type, 1) / 8
  gbs = fn s -> bytes / s / 1.0e9 end

  # The copy ceiling: the best of a plain memcpy (Emily.Native.copy) and a
  # threaded streaming read + write (negate) of the same bytes.
  memcpy = time_s.(fn -> Emily.Native.copy(x.data.ref) end)
  negate = time_s.(fn -> eval!.(Nx.negate(x)) end)
  copy = gbs.(min(memcpy, negate))

  IO.puts(
    "| copy (memcpy #{Float.round(gbs.(memcpy), 1)}, negate #{Float.round(gbs.(negate), 1)}) | " <>
      "#{rows}x#{cols} | #{Nx.Type.to_string(type)} | #{Float.round(copy, 1)} | 100% | | | |"
  )

  for op <- [:rms_norm, :layer_norm, :softmax, :rope] do
    f = fused[op]
    c = composed[op]
    cj = Nx.Defn.jit(c, compiler: Emily.Compiler)
    tf = time_s.(fn -> eval!.(f.(x, w)) end)
    tc = time_s.(fn -> eval!.(c.(x, w)) end)
    tj = time_s.(fn -> eval!.(cj.(x, w)) end)
    best_composed = min(tc, tj)

    IO.puts(
      "| #{op} | #{rows}x#{cols} | #{Nx.Type.to_string(type)} | #{Float.round(gbs.(tf), 1)} | " <>
        "#{round(100 * gbs.(tf) / copy)}% | #{Float.round(gbs.(tc), 1)} | #{Float.round(gbs.(tj), 1)} | " <>
        "#{Float.round(best_composed / tf, 2)}x |"
    )
  end
end
