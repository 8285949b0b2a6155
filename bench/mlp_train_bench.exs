# One MLP training step (forward + backward + SGD update): Emily
# (Nx.Defn.value_and_grad run by Nx.Defn.Evaluator on Emily.Backend, op by op
# into a lazy graph then one eval; and the same step compiled by
# Emily.Compiler into one program) against
# numpy's hand-written forward/backward and MLX CPU
# (mx.compile(mx.value_and_grad(...))), in the same run.
#
#   mix run bench/mlp_train_bench.exs [reps]
#
# MLP 784-512-512-10, ReLU, softmax cross-entropy, batch 128, f32. Inputs and
# weights are the deterministic formulas of bench/mlp_train_bench.py, so the
# first-step losses of the three agree. Prints the median ms/step per library
# and the ratios (> 1: Emily is faster). MLX is optional (pip install mlx
# mlx-cpu for the python3 on PATH).

Nx.default_backend(Emily.Backend)

reps =
  case System.argv() do
    [n] -> String.to_integer(n)
    _ -> 30
  end

warmup = 5
batch = 128
sizes = [784, 512, 512, 10]
lr = 0.01

# sin(counter * 1.3 + seed) * scale, computed in f64 then rounded to f32.
counter_sin = fn shape, seed, scale ->
  n = shape |> Tuple.to_list() |> Enum.product()

  Nx.iota({n}, type: :f64)
  |> Nx.multiply(1.3)
  |> Nx.add(seed)
  |> Nx.sin()
  |> Nx.multiply(scale)
  |> Nx.as_type(:f32)
  |> Nx.reshape(shape)
end

x = counter_sin.({batch, 784}, 0.0, 1.0)

y =
  Nx.iota({batch, 1}, type: :s32)
  |> Nx.multiply(7)
  |> Nx.remainder(10)
  |> Nx.equal(Nx.iota({1, 10}, type: :s32))
  |> Nx.as_type(:f32)

params =
  sizes
  |> Enum.zip(tl(sizes))
  |> Enum.with_index()
  |> Enum.flat_map(fn {{fan_in, fan_out}, i} ->
    [
      counter_sin.({fan_in, fan_out}, 1.0 + i, :math.sqrt(2.0 / fan_in)),
      Nx.broadcast(Nx.tensor(0.0, type: :f32), {fan_out})
    ]
  end)

loss_fn = fn {w1, b1, w2, b2, w3, b3}, x, y ->
  h = x |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0.0)
  h = h |> Nx.dot(w2) |> Nx.add(b2) |> Nx.max(0.0)
  z = h |> Nx.dot(w3) |> Nx.add(b3)
  log_probs = Nx.subtract(z, Nx.logsumexp(z, axes: [1], keep_axes: true))
  log_probs |> Nx.multiply(y) |> Nx.sum(axes: [1]) |> Nx.mean() |> Nx.negate()
end


eval_all = fn tensors ->
  :ok = Emily.Native.await(Emily.Native.eval(Emily.Stream.current(), Enum.map(tensors, & &1.data.ref)))
end

eval_all.([x, y | params])

# Parameters travel as a tuple (an Nx container); x and y are arguments so
# that the compiled step does not capture them.
step_fn = fn params, x, y ->
  {loss, grads} = Nx.Defn.value_and_grad(params, &loss_fn.(&1, x, y))

  new =
    Enum.zip_with(Tuple.to_list(params), Tuple.to_list(grads), fn p, g ->
      Nx.subtract(p, Nx.multiply(g, lr))
    end)

  {loss, List.to_tuple(new)}
end

eager_step = Nx.Defn.jit(step_fn, compiler: Nx.Defn.Evaluator)
compiled_step = Nx.Defn.jit(step_fn, compiler: Emily.Compiler)

to_update = fn jitted ->
  fn params ->
    {loss, new} = jitted.(List.to_tuple(params), x, y)
    {loss, Tuple.to_list(new)}
  end
end

update = to_update.(eager_step)
# The same step traced once and replayed (forward, backward and update in
# one program).
compiled_update = to_update.(compiled_step)

median = fn list ->
  sorted = Enum.sort(list)
  n = length(sorted)

  if rem(n, 2) == 1,
    do: Enum.at(sorted, div(n, 2)),
    else: (Enum.at(sorted, div(n, 2) - 1) + Enum.at(sorted, div(n, 2))) / 2
end

# {median ms/step, first loss, last loss} over `reps` steps after warm-up.
run_steps = fn update ->
  step = fn params ->
    {loss, params} = update.(params)
    eval_all.([loss | params])
    {params, Nx.to_number(loss)}
  end

  {times, losses, _params} =
    Enum.reduce(1..(warmup + reps), {[], [], params}, fn _, {times, losses, params} ->
      t0 = System.monotonic_time(:microsecond)
      {params, loss} = step.(params)
      dt = (System.monotonic_time(:microsecond) - t0) / 1000
      {[dt | times], [loss | losses], params}
    end)

  [times |> Enum.take(reps) |> median.(), List.last(losses), hd(losses)]
end

eager_result = run_steps.(update)
compiled_result = run_steps.(compiled_update)
[emily_ms, first_loss, last_loss] = eager_result

script = Path.join(__DIR__, "mlp_train_bench.py")

# numpy/MLX run twice: BLAS on one thread, and on one thread per core. On a
# small shared machine OpenBLAS's spinning threads can make the second far
# slower; both are shown.
python = fn threads, args ->
  {json, 0} =
    System.cmd("python3", [script, Integer.to_string(reps) | args],
      env: [{"OPENBLAS_NUM_THREADS", threads}, {"OMP_NUM_THREADS", threads}]
    )

  # The script prints one flat JSON object; read the numbers per library.
  for lib <- ["numpy", "mlx"], into: %{} do
    number = "(-?[0-9.]+(?:e[+-]?[0-9]+)?)"
    pattern = ~r/"#{lib}": \{"ms": #{number}, "first_loss": #{number}, "last_loss": #{number}\}/

    case Regex.run(pattern, json) do
      [_, ms, first, last] -> {lib, Enum.map([ms, first, last], &String.to_float/1)}
      nil -> {lib, nil}
    end
  end
end

cores = System.schedulers_online()
one_thread = python.("1", [])
all_threads = python.(Integer.to_string(cores), ["numpy"])

{cpu, 0} = System.cmd("sh", ["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"])

IO.puts("""
MLP 784-512-512-10 training step (fwd + bwd + SGD), batch 128, f32, CPU
machine:#{String.trim_trailing(cpu)}, #{System.schedulers_online()} cores; median of #{reps} steps after #{warmup} warm-up
""")

fmt = fn x, d -> :erlang.float_to_binary(x * 1.0, decimals: d) end

IO.puts(
  String.pad_trailing("library", 37) <>
    "ms/step   loss step 1   loss step #{warmup + reps}   ratio (lib / Emily)"
)

row = fn name, [ms, first, last] ->
  IO.puts(
    String.pad_trailing(name, 37) <>
      String.pad_leading(fmt.(ms, 2), 7) <>
      String.pad_leading(fmt.(first, 6), 14) <>
      String.pad_leading(fmt.(last, 6), 14) <> String.pad_leading(fmt.(ms / emily_ms, 2), 12)
  )
end

row.("Emily value_and_grad (lazy, 1 eval)", [emily_ms, first_loss, last_loss])
row.("Emily jit(value_and_grad + update)", compiled_result)

row.("numpy hand-written, BLAS 1 thread", one_thread["numpy"])
row.("numpy hand-written, BLAS #{cores} threads", all_threads["numpy"])

case one_thread["mlx"] do
  nil -> IO.puts("MLX: not installed (pip install mlx mlx-cpu)")
  result -> row.("MLX CPU compile(value_and_grad)", result)
end
