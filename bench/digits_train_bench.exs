# The digits MLP (64-128-10, ReLU, softmax cross-entropy, SGD with momentum;
# examples/mlp_digits.exs's model and data) trained step by step, timed per
# training step on every device and compiler mode given:
#
#   mix run bench/digits_train_bench.exs [--gpu] [steps]
#
# Modes: the CPU (Emily.Compiler, fused), and with --gpu the GPU (fused) and
# the GPU with `cuda_graph: true` (the step replayed as one CUDA graph).
# Each mode trains `steps` steps (default 300, after 20 warm-up steps) over
# batches of 64 rows taken in turn from the training set, which lives on the
# mode's device; the parameters of each step feed the next and the loss is
# read once at the end, as a training loop that logs per epoch does. Prints
# ms per step (wall clock over all steps / steps; median of 3 rounds), steps/s
# and the final loss, which must agree between modes.

Code.require_file("../examples/support/digits.exs", __DIR__)
Code.require_file("../examples/support/mlp_digits_model.exs", __DIR__)

{flags, rest, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean])
steps = with [n] <- rest, do: String.to_integer(n), else: (_ -> 300)
warmup = 20
batch = 64

modes =
  [{"cpu, Emily.Compiler (fused)", :cpu, []}] ++
    if flags[:gpu],
      do: [
        {"gpu, Emily.Compiler (fused)", :gpu, []},
        {"gpu, Emily.Compiler (fused), cuda_graph", :gpu, [cuda_graph: true]}
      ],
      else: []

Nx.global_default_backend({Emily.Backend, device: :cpu})
%{train: {x_train, y_train}} = Digits.load()
y_train = Nx.equal(Nx.new_axis(y_train, 1), Nx.iota({1, 10})) |> Nx.as_type(:f32)
n_batches = div(elem(Nx.shape(x_train), 0), batch)

key = Nx.Random.key(2026)
{w1, key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 64), shape: {64, 128})
{w2, _key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 128), shape: {128, 10})
params0 = %{w1: w1, b1: Nx.broadcast(0.0, {128}), w2: w2, b2: Nx.broadcast(0.0, {10})}

IO.puts(
  "digits MLP 64-128-10 training step, batch #{batch}, #{steps} steps per round " <>
    "(#{warmup} warm-up), #{System.schedulers_online()} schedulers"
)

IO.puts("| mode | ms / step | steps / s | final loss |")
IO.puts("| --- | ---: | ---: | ---: |")

for {name, device, options} <- modes do
  backend = {Emily.Backend, device: device}
  to = &Nx.backend_copy(&1, backend)
  # The batches, on the device once (slicing them is not the step's work).
  xs =
    for b <- 0..(n_batches - 1), do: to.(Nx.slice_along_axis(x_train, b * batch, batch, axis: 0))

  ys =
    for b <- 0..(n_batches - 1), do: to.(Nx.slice_along_axis(y_train, b * batch, batch, axis: 0))

  batches = Enum.zip(xs, ys) |> List.to_tuple()
  step = Nx.Defn.jit(&MLPDigits.train_step/4, [compiler: Emily.Compiler] ++ options)

  train = fn params, velocity, first, count ->
    Enum.reduce(first..(first + count - 1), {nil, params, velocity}, fn i, {_, p, v} ->
      {x, y} = elem(batches, rem(i, n_batches))
      step.(p, v, x, y)
    end)
  end

  params = Map.new(params0, fn {k, v} -> {k, to.(v)} end)
  velocity = Map.new(params, fn {k, v} -> {k, Nx.multiply(v, 0.0)} end)
  {loss, params, velocity} = train.(params, velocity, 0, warmup)
  Nx.to_number(loss)

  {times, {loss, _, _}} =
    Enum.map_reduce(1..3, {loss, params, velocity}, fn _, {_, p, v} ->
      t0 = System.monotonic_time(:microsecond)
      {loss, p, v} = train.(p, v, 0, steps)
      # Reading the loss waits for the last step, hence for all of them.
      Nx.to_number(loss)
      {System.monotonic_time(:microsecond) - t0, {loss, p, v}}
    end)

  ms = Enum.at(Enum.sort(times), 1) / steps / 1000

  IO.puts(
    "| #{name} | #{:erlang.float_to_binary(ms, decimals: 3)} | " <>
      "#{round(1000 / ms)} | #{:erlang.float_to_binary(Nx.to_number(loss), decimals: 5)} |"
  )
end
