# Serves a digit classifier with Nx.Serving on Emily: a supervised serving
# process gathers requests from many client processes into batches of up to
# 16 images and runs each batch through one function compiled by
# Emily.Compiler.
#
#   mix run examples/serving.exs [--gpu]
#
# The model is a nearest-centroid classifier on scikit-learn's 8x8 digits:
# the mean image of each class in the training set; an image's class is the
# nearest mean (squared distance through one matrix product).

Code.require_file("support/digits.exs", __DIR__)

{flags, _, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean])
device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})

defmodule NearestCentroid do
  import Nx.Defn

  @doc "The mean image of each of the 10 classes: f32 {10, 64}."
  defn fit(x, labels) do
    one_hot = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10})) |> Nx.as_type(:f32)
    Nx.dot(one_hot, [0], x, [0]) / Nx.new_axis(Nx.sum(one_hot, axes: [0]), 1)
  end

  @doc "The class of each row of x: ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2."
  defn predict(x, centroids) do
    distances =
      Nx.sum(x * x, axes: [1], keep_axes: true) - 2 * Nx.dot(x, [1], centroids, [1]) +
        Nx.sum(centroids * centroids, axes: [1])

    Nx.argmin(distances, axis: 1)
  end
end

%{train: {x_train, y_train}, test: {x_test, y_test}} = Digits.load()
centroids = Nx.Defn.jit(&NearestCentroid.fit/2, compiler: Emily.Compiler).(x_train, y_train)

# The serving function is one-argument (a batch), so the centroids are
# captured: a defn expression embeds captured tensors as constants, and only
# Nx.BinaryBackend tensors can be embedded (Emily.Compiler brings the
# constant onto its device once, when the program is built).
centroids = Nx.backend_copy(centroids, Nx.BinaryBackend)

serving =
  Nx.Serving.jit(&NearestCentroid.predict(&1, centroids), compiler: Emily.Compiler)
  |> Nx.Serving.client_preprocessing(fn image -> {Nx.Batch.stack([image]), :ok} end)
  |> Nx.Serving.client_postprocessing(fn {classes, _metadata}, :ok ->
    classes |> Nx.squeeze() |> Nx.to_number()
  end)

# Count the batches the serving runs (one execute span per batch).
defmodule BatchCounter do
  def handle_event(_event, _measurements, _metadata, counter), do: :counters.add(counter, 1, 1)
end

counter = :counters.new(1, [])
:telemetry.attach("serving-batches", [:nx, :serving, :execute, :stop], &BatchCounter.handle_event/4, counter)

{:ok, _supervisor} =
  Supervisor.start_link(
    [{Nx.Serving, serving: serving, name: DigitsServing, batch_size: 16, batch_timeout: 5}],
    strategy: :one_for_one
  )

images = Nx.to_batched(x_test, 1) |> Enum.map(&Nx.squeeze(&1, axes: [0]))
labels = Nx.to_flat_list(y_test)
started = System.monotonic_time(:microsecond)

# One client process per image, all at once: the serving batches them.
predicted =
  images
  |> Task.async_stream(&Nx.Serving.batched_run(DigitsServing, &1), max_concurrency: 64)
  |> Enum.map(fn {:ok, class} -> class end)

elapsed_ms = (System.monotonic_time(:microsecond) - started) / 1000
hits = Enum.zip(predicted, labels) |> Enum.count(fn {a, b} -> a == b end)
batches = :counters.get(counter, 1)

IO.puts("""
nearest-centroid digits classifier served by Nx.Serving on Emily (#{device})
  #{length(labels)} requests from concurrent clients in #{:erlang.float_to_binary(elapsed_ms, decimals: 1)} ms
  #{batches} batches, #{:erlang.float_to_binary(length(labels) / max(batches, 1), decimals: 1)} images per batch on average
  accuracy #{:erlang.float_to_binary(100 * hits / length(labels), decimals: 2)}%
""")
