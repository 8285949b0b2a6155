# Trains a 64-128-10 MLP (ReLU, softmax cross-entropy) on scikit-learn's
# 8x8 handwritten digits with Emily's autodiff and SGD with momentum.
#
#   mix run examples/mlp_digits.exs [epochs] [--gpu]
#
# With --gpu every tensor is created on CUDA device 0 (the default backend
# becomes {Emily.Tensor, device: :gpu}), so the same code trains there.
#
# Needs python3-sklearn (scripts/setup.sh installs it) for the data file.
# The training step (forward pass, backward pass from value_and_grad, and
# the SGD-momentum update) is one function compiled with Emily.Tensor.Compiler.jit:
# traced once, then replayed in one NIF call per batch, and the loss, the
# new parameters and the new velocities are evaluated in one call.

alias Emily.Tensor.Compiler
alias Emily.Tensor, as: T

{flags, rest, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean])

epochs =
  case rest do
    [n] -> String.to_integer(n)
    _ -> 12
  end

device = if flags[:gpu], do: :gpu, else: :cpu
Emily.Tensor.global_default_backend({Emily.Tensor, device: device})

# ---- data --------------------------------------------------------------

# Debian's python3 (python3-sklearn), else the first python3 on the PATH
# that has scikit-learn.
path =
  ["/usr/bin/python3", System.find_executable("python3")]
  |> Enum.filter(&(&1 && File.exists?(&1)))
  |> Enum.find_value(fn python ->
    script =
      "import os, sklearn; print(os.path.join(os.path.dirname(sklearn.__file__), " <>
        "'datasets', 'data', 'digits.csv.gz'))"

    case System.cmd(python, ["-c", script], stderr_to_stdout: true) do
      {path, 0} -> path
      _ -> nil
    end
  end) || raise "scikit-learn's digits data not found: install python3-sklearn"

# The file's numbers are written as "0" or "0.0".
parse_number = fn text ->
  case Float.parse(text) do
    {x, ""} -> x
    _ -> raise "unexpected value in the digits file: #{inspect(text)}"
  end
end

rows =
  path
  |> String.trim()
  |> File.read!()
  |> :zlib.gunzip()
  |> String.split("\n", trim: true)
  |> Enum.map(fn line -> line |> String.split(",") |> Enum.map(&parse_number.(&1)) end)

# A fixed shuffle, then 80% train / 20% test.
:rand.seed(:exsss, {2026, 11, 29})
rows = Enum.shuffle(rows)
n_test = div(length(rows), 5)
{test_rows, train_rows} = Enum.split(rows, n_test)

split_xy = fn rows ->
  x = rows |> Enum.map(&Enum.take(&1, 64)) |> T.tensor(type: :f32)
  labels = rows |> Enum.map(&trunc(List.last(&1)))
  {x, labels}
end

{x_train, y_train} = split_xy.(train_rows)
{x_test, y_test} = split_xy.(test_rows)

# Standardise with the training set's statistics (constant pixels stay 0).
mean = T.mean(x_train, axes: [0])
std = x_train |> T.standard_deviation(axes: [0]) |> T.max(1.0e-3)
standardise = fn x -> x |> T.subtract(mean) |> T.divide(std) end
x_train = standardise.(x_train)
x_test = standardise.(x_test)

one_hot = fn labels ->
  labels
  |> T.tensor(type: :s32)
  |> T.new_axis(1)
  |> T.equal(T.iota({1, 10}, type: :s32))
  |> T.as_type(:f32)
end

# ---- model ---------------------------------------------------------------

init = fn {rows, cols} ->
  scale = :math.sqrt(2.0 / rows)

  for(_ <- 1..(rows * cols), do: :rand.normal() * scale)
  |> T.tensor(type: :f32)
  |> T.reshape({rows, cols})
end

params = %{
  w1: init.({64, 128}),
  b1: T.broadcast(T.tensor(0.0, type: :f32), {128}),
  w2: init.({128, 10}),
  b2: T.broadcast(T.tensor(0.0, type: :f32), {10})
}

logits = fn p, x ->
  x |> T.dot(p.w1) |> T.add(p.b1) |> T.max(0.0) |> T.dot(p.w2) |> T.add(p.b2)
end

loss_fn = fn p, x, y ->
  z = logits.(p, x)
  log_probs = T.subtract(z, T.logsumexp(z, axes: [1], keep_axes: true))
  log_probs |> T.multiply(y) |> T.sum(axes: [1]) |> T.mean() |> T.negate()
end

grad_fn = Compiler.value_and_grad(loss_fn)

accuracy = fn p, x, labels ->
  predicted = logits.(p, x) |> T.argmax(axis: 1) |> T.to_flat_list()
  hits = Enum.zip(predicted, labels) |> Enum.count(fn {a, b} -> a == b end)
  hits / length(labels)
end

# One evaluation for everything a step produces.
eval_all = fn tensors ->
  refs = Enum.map(tensors, & &1.ref)
  :ok = Emily.Native.await(Emily.Native.eval(Emily.Stream.current(), refs))
end

# ---- training ------------------------------------------------------------

batch = 64
lr = 0.05
momentum = 0.9
n_train = elem(T.shape(x_train), 0)
batches = div(n_train, batch)
velocity = Map.new(params, fn {k, v} -> {k, T.multiply(v, 0.0)} end)

train_step =
  Compiler.jit(fn params, velocity, xb, yb ->
    {loss, grads} = grad_fn.(params, xb, yb)

    velocity = Map.new(velocity, fn {k, v} -> {k, T.add(T.multiply(v, momentum), grads[k])} end)

    params = Map.new(params, fn {k, p} -> {k, T.subtract(p, T.multiply(velocity[k], lr))} end)
    {loss, params, velocity}
  end)

bar_width = 30

IO.puts(
  "MLP 64-128-10 on 8x8 digits (#{device}): #{n_train} train / #{n_test} test, " <>
    "batch #{batch}, SGD momentum #{momentum}, lr #{lr}"
)

started = System.monotonic_time(:millisecond)

{params, _velocity} =
  Enum.reduce(1..epochs, {params, velocity}, fn epoch, {params, velocity} ->
    # A fresh order of the training rows each epoch (seeded).
    order = Enum.shuffle(0..(n_train - 1)) |> T.tensor(type: :s32)
    x_epoch = T.take(x_train, order, axis: 0)
    y_epoch = one_hot.(Enum.map(T.to_flat_list(order), &Enum.at(y_train, &1)))

    {params, velocity, loss_sum} =
      Enum.reduce(0..(batches - 1), {params, velocity, 0.0}, fn b, {params, velocity, loss_sum} ->
        xb = T.slice_along_axis(x_epoch, b * batch, batch, axis: 0)
        yb = T.slice_along_axis(y_epoch, b * batch, batch, axis: 0)
        {loss, params, velocity} = train_step.(params, velocity, xb, yb)
        eval_all.([loss | Map.values(params) ++ Map.values(velocity)])

        done = div((b + 1) * bar_width, batches)
        bar = String.duplicate("#", done) <> String.duplicate(".", bar_width - done)
        IO.write("\repoch #{String.pad_leading("#{epoch}", 2)}/#{epochs} [#{bar}]")
        {params, velocity, loss_sum + T.to_number(loss)}
      end)

    acc = accuracy.(params, x_train, y_train)

    IO.write(
      "\repoch #{String.pad_leading("#{epoch}", 2)}/#{epochs} [#{String.duplicate("#", bar_width)}] " <>
        "loss #{:erlang.float_to_binary(loss_sum / batches, decimals: 4)}  " <>
        "train acc #{:erlang.float_to_binary(100 * acc, decimals: 1)}%\n"
    )

    {params, velocity}
  end)

elapsed = System.monotonic_time(:millisecond) - started
test_acc = accuracy.(params, x_test, y_test)

IO.puts(
  "test accuracy #{:erlang.float_to_binary(100 * test_acc, decimals: 2)}% " <>
    "(#{n_test} images), trained in #{elapsed} ms"
)
