# Whole models as defn: Emily.Compiler (one engine program per function,
# replayed) against the same graph built eagerly on Emily.Backend, and
# against Nx.Defn.Evaluator on Nx.BinaryBackend (Nx's pure-Elixir
# reference).
#
#   MIX_ENV=test mix run bench/defn_models.exs [steps] [bert_layers] [binary]
#
# steps 0 leaves the digits step out; binary 0 leaves Nx.BinaryBackend out.
#
# 1. The digits training step: MLP 64-128-10 (tanh, softmax cross-entropy
#    on logits), batch 64, f32: forward, Nx.Defn.value_and_grad, an
#    SGD-with-momentum update. Each step takes the previous step's
#    parameters and momenta, and all of its outputs are evaluated (one
#    engine eval of every result) before the next: the time of a training
#    loop's iteration. Paths:
#      * Emily.Compiler (fused, and fuse: false);
#      * eager Emily.Backend, the defn's graph: the same defn on
#        Nx.Defn.Evaluator with Emily tensors (it walks the expression each
#        call and calls Emily.Backend op by op; the engine graph is the one
#        the compiler records);
#      * eager Emily.Backend, hand-written: forward and backward written out
#        with Nx calls on Emily tensors, no defn at all (the graph a user
#        would build by hand; close to, not identical with, Nx's autodiff);
#      * Nx.Defn.Evaluator on Nx.BinaryBackend: a few steps only.
# 2. A BERT-base-sized encoder forward: hidden 768, 12 heads, intermediate
#    3072, sequence 128, batch 1, `bert_layers` layers (default 2) of
#    random weights: self-attention with softmax, residuals, layer norm,
#    GELU (erf). Emily.Compiler against the same defn on the Evaluator with
#    Emily tensors; Nx.BinaryBackend for one call if it finishes within 60 s.
#
# Prints median ms per step/call with the 10th-90th percentiles, and the
# ratios. The paths are measured in 3 interleaved rounds and each keeps
# its round of lowest median: a machine shared with other work slows
# rounds down in bursts, and interleaving spreads those over the paths.
# No figures are asserted anywhere: see bench/RESULTS.md.

Code.require_file("support/timing.exs", __DIR__)

defmodule DefnModels do
  import Nx.Defn

  # ---- digits MLP ------------------------------------------------------------

  defn loss(params, x, y) do
    h = Nx.tanh(Nx.dot(x, params.w1) + params.b1)
    logits = Nx.dot(h, params.w2) + params.b2
    max = Nx.reduce_max(logits, axes: [1], keep_axes: true)
    shifted = logits - stop_grad(max)
    log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    -Nx.mean(Nx.sum(y * log_probs, axes: [1]))
  end

  defn train_step(params, momenta, x, y) do
    {loss, grads} = value_and_grad(params, &loss(&1, x, y))
    momenta = %{w1: 0.9 * momenta.w1 + grads.w1, b1: 0.9 * momenta.b1 + grads.b1, w2: 0.9 * momenta.w2 + grads.w2, b2: 0.9 * momenta.b2 + grads.b2}
    params = %{w1: params.w1 - 0.05 * momenta.w1, b1: params.b1 - 0.05 * momenta.b1, w2: params.w2 - 0.05 * momenta.w2, b2: params.b2 - 0.05 * momenta.b2}
    {params, momenta, loss}
  end

  # The same step with the backward pass written out: plain Nx calls, run
  # eagerly on whatever backend the tensors have.
  def train_step_by_hand(params, momenta, x, y) do
    batch = elem(Nx.shape(x), 0)
    z1 = Nx.add(Nx.dot(x, params.w1), params.b1)
    h = Nx.tanh(z1)
    logits = Nx.add(Nx.dot(h, params.w2), params.b2)
    shifted = Nx.subtract(logits, Nx.reduce_max(logits, axes: [1], keep_axes: true))
    exp = Nx.exp(shifted)
    sum = Nx.sum(exp, axes: [1], keep_axes: true)
    log_probs = Nx.subtract(shifted, Nx.log(sum))
    loss = Nx.negate(Nx.mean(Nx.sum(Nx.multiply(y, log_probs), axes: [1])))

    # d loss / d logits = (softmax - y) / batch
    dlogits = Nx.divide(Nx.subtract(Nx.divide(exp, sum), y), batch)
    dw2 = Nx.dot(Nx.transpose(h), dlogits)
    db2 = Nx.sum(dlogits, axes: [0])
    dz1 = Nx.multiply(Nx.dot(dlogits, Nx.transpose(params.w2)), Nx.subtract(1, Nx.multiply(h, h)))
    dw1 = Nx.dot(Nx.transpose(x), dz1)
    db1 = Nx.sum(dz1, axes: [0])
    grads = %{w1: dw1, b1: db1, w2: dw2, b2: db2}

    momenta = Map.new(momenta, fn {k, m} -> {k, Nx.add(Nx.multiply(0.9, m), grads[k])} end)
    params = Map.new(params, fn {k, p} -> {k, Nx.subtract(p, Nx.multiply(0.05, momenta[k]))} end)
    {params, momenta, loss}
  end

  # ---- BERT-sized encoder ----------------------------------------------------

  # BERT-base: 12 heads of 64.
  @heads 12
  @head_dim 64

  defn encoder(x, layers) do
    # A tuple of layers is unrolled at trace time: one program for all.
    unroll(x, layers)
  end

  deftransformp unroll(x, layers) do
    layers |> Tuple.to_list() |> Enum.reduce(x, &encoder_layer(&2, &1))
  end

  defn encoder_layer(x, p) do
    {batch, seq, hidden} = Nx.shape(x)
    split = fn t -> t |> Nx.reshape({batch, seq, @heads, @head_dim}) |> Nx.transpose(axes: [0, 2, 1, 3]) end
    q = split.(Nx.dot(x, p.wq) + p.bq)
    k = split.(Nx.dot(x, p.wk) + p.bk)
    v = split.(Nx.dot(x, p.wv) + p.bv)

    scores = Nx.dot(q, [3], [0, 1], k, [3], [0, 1]) / Nx.sqrt(@head_dim)
    scores = scores - Nx.reduce_max(scores, axes: [-1], keep_axes: true)
    weights = Nx.exp(scores)
    weights = weights / Nx.sum(weights, axes: [-1], keep_axes: true)
    context = Nx.dot(weights, [3], [0, 1], v, [2], [0, 1])
    context = context |> Nx.transpose(axes: [0, 2, 1, 3]) |> Nx.reshape({batch, seq, hidden})

    x = layer_norm(x + Nx.dot(context, p.wo) + p.bo, p.ln1_g, p.ln1_b)
    inner = Nx.dot(x, p.w1) + p.b1
    inner = 0.5 * inner * (1 + Nx.erf(inner / Nx.sqrt(2)))
    layer_norm(x + Nx.dot(inner, p.w2) + p.b2, p.ln2_g, p.ln2_b)
  end

  defn layer_norm(x, g, b) do
    mean = Nx.mean(x, axes: [-1], keep_axes: true)
    centered = x - mean
    var = Nx.mean(centered * centered, axes: [-1], keep_axes: true)
    centered * Nx.rsqrt(var + 1.0e-12) * g + b
  end

  # ---- helpers ---------------------------------------------------------------

  # Evaluates every Emily tensor of a container in one engine call (the
  # results are lazy until then).
  def eval_all(container) do
    refs = for %Nx.Tensor{data: %Emily.Backend{ref: ref}} <- Nx.Defn.Composite.flatten_list([container]), do: ref
    if refs != [], do: Emily.Native.await(Emily.Native.eval(Emily.Stream.current(), refs))
    container
  end

  def to_backend(container, backend), do: Nx.Defn.Composite.traverse(container, &Nx.backend_copy(&1, backend))

  def random(key, shape, scale) do
    {t, _} = Nx.Random.normal(Nx.Random.key(key), 0.0, scale, shape: shape, type: :f32)
    t
  end

  # ms per call: median, p10, p90 (BenchTiming gives µs).
  def ms(fun, batch, batches) do
    {m, lo, hi} = BenchTiming.measure(fun, batch, batches)
    {m / 1000, lo / 1000, hi / 1000}
  end

  # [{name, fun}] measured in `rounds` interleaved rounds; per name the
  # round of lowest median.
  def interleaved(paths, batch, batches, rounds \\ 3) do
    results = for _ <- 1..rounds, {name, fun} <- paths, do: {name, ms(fun, batch, batches)}

    for {name, _} <- paths do
      results |> Enum.filter(&(elem(&1, 0) == name)) |> Enum.map(&elem(&1, 1)) |> Enum.min_by(&elem(&1, 0))
      |> then(&{name, &1})
    end
  end

  # One timing of fun, or :timeout after `limit` ms (the task is killed).
  def once(fun, limit) do
    task = Task.async(fn -> :timer.tc(fun) end)

    case Task.yield(task, limit) || Task.shutdown(task, :brutal_kill) do
      {:ok, {us, _}} -> us / 1000
      _ -> :timeout
    end
  end
end

[steps, bert_layers, binary?] =
  Enum.zip_with(System.argv() ++ Enum.drop(["200", "2", "1"], length(System.argv())), [0, 1, 2], fn arg, _ ->
    String.to_integer(arg)
  end)

binary? = binary? != 0

fmt = fn
  {m, lo, hi} -> "#{:erlang.float_to_binary(m, decimals: 3)} (#{:erlang.float_to_binary(lo, decimals: 3)}–#{:erlang.float_to_binary(hi, decimals: 3)})"
  :timeout -> "did not finish in 60 s"
  m when is_float(m) -> :erlang.float_to_binary(m, decimals: 1)
end

ratio = fn a, b -> :erlang.float_to_binary(elem(b, 0) / elem(a, 0), decimals: 2) <> "×" end

IO.puts("#{System.schedulers_online()} schedulers; median ms (p10–p90)\n")

# ---- 1. digits training step -------------------------------------------------

if steps > 0 do

params = %{
  w1: DefnModels.random(1, {64, 128}, :math.sqrt(1 / 64)),
  b1: Nx.broadcast(0.0, {128}),
  w2: DefnModels.random(2, {128, 10}, :math.sqrt(1 / 128)),
  b2: Nx.broadcast(0.0, {10})
}

momenta = Map.new(params, fn {k, v} -> {k, Nx.multiply(v, 0.0)} end)
x = DefnModels.random(3, {64, 64}, 1.0)
y = Nx.iota({64, 1}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({1, 10})) |> Nx.as_type(:f32)

emily = DefnModels.to_backend({params, momenta, x, y}, Emily.Backend)
binary = DefnModels.to_backend({params, momenta, x, y}, Nx.BinaryBackend)

# Each path runs a training loop: `step` maps the state to the next one.
# The state lives in the process dictionary between steps.
loop = fn step, {params, momenta, x, y} ->
  Process.put(:bench_state, {params, momenta})

  fn ->
    {p, m} = Process.get(:bench_state)
    {p, m, loss} = step.(p, m, x, y) |> DefnModels.eval_all()
    Process.put(:bench_state, {p, m})
    loss
  end
end

compiled = Nx.Defn.jit(&DefnModels.train_step/4, compiler: Emily.Compiler)
unfused = Nx.Defn.jit(&DefnModels.train_step/4, compiler: Emily.Compiler, fuse: false)
evaluator = Nx.Defn.jit(&DefnModels.train_step/4, compiler: Nx.Defn.Evaluator)

# The paths agree: one step from the same state.
{_, _, l1} = compiled.(elem(emily, 0), elem(emily, 1), elem(emily, 2), elem(emily, 3))
{_, _, l2} = DefnModels.train_step_by_hand(elem(emily, 0), elem(emily, 1), elem(emily, 2), elem(emily, 3))
{_, _, l3} = evaluator.(elem(binary, 0), elem(binary, 1), elem(binary, 2), elem(binary, 3))
IO.puts("digits step, first loss: compiler #{Nx.to_number(l1)}, by hand #{Nx.to_number(l2)}, BinaryBackend #{Nx.to_number(l3)}\n")

batch = 20
batches = max(div(steps, batch), 3)

digits =
  DefnModels.interleaved(
    [
      {"Emily.Compiler", loop.(compiled, emily)},
      {"Emily.Compiler, fuse: false", loop.(unfused, emily)},
      {"eager Emily.Backend, the defn's graph (Evaluator)", loop.(evaluator, emily)},
      {"eager Emily.Backend, by hand (no defn)", loop.(&DefnModels.train_step_by_hand/4, emily)}
    ],
    batch,
    batches
  ) ++ if(binary?, do: [{"Nx.Defn.Evaluator, Nx.BinaryBackend", DefnModels.ms(loop.(evaluator, binary), 1, 5)}], else: [])

IO.puts("### Digits training step (MLP 64-128-10, batch 64, value_and_grad + SGD momentum), best of 3 rounds of #{batch * batches} steps\n")
IO.puts("| path | ms/step | Emily.Compiler is |")
IO.puts("| --- | ---: | ---: |")
[{_, base} | _] = digits
for {name, t} <- digits, do: IO.puts("| #{name} | #{fmt.(t)} | #{ratio.(base, t)} |")
end

# ---- 2. BERT-sized encoder forward --------------------------------------------

hidden = 768
inter = 3072

layers =
  for i <- 1..bert_layers do
    w = fn j, shape -> DefnModels.random(100 * i + j, shape, 0.02) end

    %{
      wq: w.(1, {hidden, hidden}), bq: Nx.broadcast(0.0, {hidden}),
      wk: w.(2, {hidden, hidden}), bk: Nx.broadcast(0.0, {hidden}),
      wv: w.(3, {hidden, hidden}), bv: Nx.broadcast(0.0, {hidden}),
      wo: w.(4, {hidden, hidden}), bo: Nx.broadcast(0.0, {hidden}),
      ln1_g: Nx.broadcast(1.0, {hidden}), ln1_b: Nx.broadcast(0.0, {hidden}),
      w1: w.(5, {hidden, inter}), b1: Nx.broadcast(0.0, {inter}),
      w2: w.(6, {inter, hidden}), b2: Nx.broadcast(0.0, {hidden}),
      ln2_g: Nx.broadcast(1.0, {hidden}), ln2_b: Nx.broadcast(0.0, {hidden})
    }
  end
  |> List.to_tuple()

tokens = DefnModels.random(7, {1, 128, hidden}, 1.0)
{e_tokens, e_layers} = DefnModels.to_backend({tokens, layers}, Emily.Backend) |> DefnModels.eval_all()
{b_tokens, b_layers} = DefnModels.to_backend({tokens, layers}, Nx.BinaryBackend)

bert_compiled = Nx.Defn.jit(&DefnModels.encoder/2, compiler: Emily.Compiler)
bert_unfused = Nx.Defn.jit(&DefnModels.encoder/2, compiler: Emily.Compiler, fuse: false)
bert_eager = Nx.Defn.jit(&DefnModels.encoder/2, compiler: Nx.Defn.Evaluator)

a = bert_compiled.(e_tokens, e_layers)
b = bert_eager.(e_tokens, e_layers)
diff = Nx.subtract(a, b) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
IO.puts("\nencoder: compiler vs eager max |difference| #{diff}\n")

run = fn f -> fn -> DefnModels.eval_all(f.(e_tokens, e_layers)) end end

bert =
  DefnModels.interleaved(
    [
      {"Emily.Compiler", run.(bert_compiled)},
      {"Emily.Compiler, fuse: false", run.(bert_unfused)},
      {"eager Emily.Backend, the defn's graph (Evaluator)", run.(bert_eager)}
    ],
    3,
    5
  ) ++
    if(binary?,
      do: [{"Nx.Defn.Evaluator, Nx.BinaryBackend (one call)", DefnModels.once(fn -> bert_eager.(b_tokens, b_layers) end, 60_000)}],
      else: []
    )

IO.puts("### BERT-base-sized encoder forward (#{bert_layers} layers, hidden 768, 12 heads, intermediate 3072, seq 128, batch 1)\n")
IO.puts("| path | ms/call | Emily.Compiler is |")
IO.puts("| --- | ---: | ---: |")
[{_, base} | _] = bert

for {name, t} <- bert do
  r = if is_tuple(t), do: ratio.(base, t), else: if(is_float(t), do: ratio.(base, {t}), else: "> #{round(60_000 / elem(base, 0))}×")
  IO.puts("| #{name} | #{fmt.(t)} | #{r} |")
end
