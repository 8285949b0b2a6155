# Trains a 64-128-10 MLP (ReLU, softmax cross-entropy) on scikit-learn's
# 8x8 handwritten digits, written by hand with Nx.Defn: the training step
# (forward pass, backward pass from Nx.Defn.value_and_grad and the
# SGD-with-momentum update) is one defn function compiled by Emily.Compiler,
# traced once and replayed in one NIF call per batch.
#
#   mix run examples/mlp_digits.exs [epochs] [--gpu]
#
# With --gpu the tensors live on CUDA device 0 (the default backend becomes
# {Emily.Backend, device: :gpu}) and the step is compiled for it, so the
# same code trains there. examples/axon_digits.exs trains the same data
# with Axon. Needs python3-sklearn (scripts/setup.sh installs it).

Code.require_file("support/digits.exs", __DIR__)
Code.require_file("support/mlp_digits_model.exs", __DIR__)

{flags, rest, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean])
epochs = with [n] <- rest, do: String.to_integer(n), else: (_ -> 12)
device = if flags[:gpu], do: :gpu, else: :cpu

Nx.global_default_backend({Emily.Backend, device: device})
Nx.Defn.global_default_options(compiler: Emily.Compiler, device: device)

%{train: {x_train, y_train}, test: {x_test, y_test}} = Digits.load()
one_hot = fn labels -> Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10})) |> Nx.as_type(:f32) end

# He initialisation from a seeded key.
key = Nx.Random.key(2026)
{w1, key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 64), shape: {64, 128})
{w2, _key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 128), shape: {128, 10})
params = %{w1: w1, b1: Nx.broadcast(0.0, {128}), w2: w2, b2: Nx.broadcast(0.0, {10})}
velocity = Map.new(params, fn {k, v} -> {k, Nx.multiply(v, 0.0)} end)

accuracy = fn p, x, labels ->
  Nx.to_number(Nx.mean(Nx.equal(MLPDigits.predict(p, x), labels)))
end

batch = 64
n_train = elem(Nx.shape(x_train), 0)
batches = div(n_train, batch)
bar_width = 30

IO.puts(
  "MLP 64-128-10 on 8x8 digits (#{device}): #{n_train} train / #{elem(Nx.shape(x_test), 0)} test, " <>
    "batch #{batch}, SGD momentum 0.9, lr 0.05, Emily.Compiler"
)

started = System.monotonic_time(:millisecond)
:rand.seed(:exsss, {2026, 11, 29})

{params, _velocity} =
  Enum.reduce(1..epochs, {params, velocity}, fn epoch, {params, velocity} ->
    # A fresh order of the training rows each epoch (seeded).
    order = Enum.shuffle(0..(n_train - 1)) |> Nx.tensor(type: :s32)
    x_epoch = Nx.take(x_train, order, axis: 0)
    y_epoch = one_hot.(Nx.take(y_train, order))

    {params, velocity, loss_sum} =
      Enum.reduce(0..(batches - 1), {params, velocity, 0.0}, fn b, {params, velocity, loss_sum} ->
        xb = Nx.slice_along_axis(x_epoch, b * batch, batch, axis: 0)
        yb = Nx.slice_along_axis(y_epoch, b * batch, batch, axis: 0)
        {loss, params, velocity} = MLPDigits.train_step(params, velocity, xb, yb)
        done = div((b + 1) * bar_width, batches)
        bar = String.duplicate("#", done) <> String.duplicate(".", bar_width - done)
        IO.write("\repoch #{String.pad_leading("#{epoch}", 2)}/#{epochs} [#{bar}]")
        {params, velocity, loss_sum + Nx.to_number(loss)}
      end)

    IO.write(
      "\repoch #{String.pad_leading("#{epoch}", 2)}/#{epochs} [#{String.duplicate("#", bar_width)}] " <>
        "loss #{:erlang.float_to_binary(loss_sum / batches, decimals: 4)}  " <>
        "train acc #{:erlang.float_to_binary(accuracy.(params, x_train, y_train) * 100, decimals: 2)}%\n"
    )

    {params, velocity}
  end)

elapsed = (System.monotonic_time(:millisecond) - started) / 1000
test_acc = accuracy.(params, x_test, y_test) * 100

IO.puts(
  "test accuracy #{:erlang.float_to_binary(test_acc, decimals: 2)}% " <>
    "after #{epochs} epochs in #{:erlang.float_to_binary(elapsed, decimals: 2)} s"
)
