# Trains a small convolutional network on scikit-learn's 8x8 handwritten
# digits with Axon and Polaris, on Emily: every tensor lives on
# Emily.Backend and every training step is one defn function compiled by
# Emily.Compiler (traced once, replayed in one NIF call per batch).
#
#   mix run examples/axon_digits.exs [epochs] [--gpu] [--mlp]
#
# --gpu puts the tensors on CUDA device 0 and compiles for it; --mlp trains
# a 64-128-10 perceptron instead of the convolutional network.

Code.require_file("support/digits.exs", __DIR__)

{flags, rest, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean, mlp: :boolean])
epochs = with [n] <- rest, do: String.to_integer(n), else: (_ -> 10)
device = if flags[:gpu], do: :gpu, else: :cpu

Nx.global_default_backend({Emily.Backend, device: device})
Nx.Defn.global_default_options(compiler: Emily.Compiler)

%{train: {x_train, y_train}, test: {x_test, y_test}} = Digits.load()
batch_size = 32

batches = fn x, labels ->
  one_hot = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10}))
  # Whole batches only: one compiled step serves every batch.
  n = div(elem(Nx.shape(x), 0), batch_size) * batch_size

  Stream.zip(
    Nx.to_batched(Nx.slice_along_axis(x, 0, n, axis: 0), batch_size),
    Nx.to_batched(Nx.slice_along_axis(one_hot, 0, n, axis: 0), batch_size)
  )
end

model =
  if flags[:mlp] do
    Axon.input("pixels", shape: {nil, 64})
    |> Axon.dense(128, activation: :relu)
    |> Axon.dense(10, activation: :softmax)
  else
    Axon.input("pixels", shape: {nil, 64})
    |> Axon.reshape({:batch, 8, 8, 1})
    |> Axon.conv(16, kernel_size: 3, padding: :same, activation: :relu)
    |> Axon.max_pool(kernel_size: 2)
    |> Axon.conv(32, kernel_size: 3, padding: :same, activation: :relu)
    |> Axon.flatten()
    |> Axon.dense(64, activation: :relu)
    |> Axon.dense(10, activation: :softmax)
  end

name = if flags[:mlp], do: "MLP 64-128-10", else: "CNN conv16-pool-conv32-dense64-10"

IO.puts(
  "#{name} on 8x8 digits (Emily.Backend, #{device}): #{elem(Nx.shape(x_train), 0)} train / " <>
    "#{elem(Nx.shape(x_test), 0)} test, batch #{batch_size}, Adam 1e-3, #{epochs} epochs"
)

started = System.monotonic_time(:millisecond)

params =
  model
  |> Axon.Loop.trainer(:categorical_cross_entropy, Polaris.Optimizers.adam(learning_rate: 1.0e-3),
    log: 1
  )
  |> Axon.Loop.metric(:accuracy)
  |> Axon.Loop.run(batches.(x_train, y_train), Axon.ModelState.empty(), epochs: epochs)

elapsed = System.monotonic_time(:millisecond) - started

# Test accuracy with the trained parameters: one compiled prediction.
{_init, predict} = Axon.build(model)
predicted = predict.(params, x_test) |> Nx.argmax(axis: 1)
accuracy = Nx.equal(predicted, y_test) |> Nx.mean() |> Nx.to_number()

IO.puts(
  "test accuracy #{:erlang.float_to_binary(100 * accuracy, decimals: 2)}% " <>
    "(#{elem(Nx.shape(x_test), 0)} images), trained in #{elapsed} ms"
)
