defmodule Emily.Bumblebee.MiniLMTest do
  # all-MiniLM-L6-v2 through Bumblebee on Emily (parameters on
  # Emily.Backend, the model compiled by Emily.Compiler, under Nx.Serving)
  # against sentence-transformers' embeddings of the same texts
  # (golden/minilm.json, written by scripts/minilm_golden.py in float64).
  # The model comes from its PyPI package through scripts/fetch_models.sh,
  # which scripts/setup.sh runs; without it the tests are skipped.
  use ExUnit.Case, async: false

  @moduletag :bumblebee
  # A first run on a GPU compiles the fused kernels (NVRTC): minutes there.
  @moduletag timeout: 300_000
  @golden Path.expand("golden/minilm.json", __DIR__)
  @model_dir Path.join(
               System.get_env("EMILY_MODELS") || Path.expand("~/.cache/emily/models"),
               "all-minilm-l6-v2"
             )

  # EMILY_TEST_DEVICE=gpu runs the same checks on the GPU (the device
  # machine's runs).
  @device if System.get_env("EMILY_TEST_DEVICE") == "gpu", do: :gpu, else: :cpu

  unless File.exists?(Path.join(@model_dir, ".complete")) do
    @moduletag skip: "all-MiniLM-L6-v2 is not installed: run scripts/fetch_models.sh"
  end

  setup_all do
    %{"texts" => texts, "embeddings" => expected} = @golden |> File.read!() |> Jason.decode!()

    {:ok, model} =
      Bumblebee.load_model({:local, @model_dir}, backend: {Emily.Backend, device: @device})

    {:ok, tokenizer} = Bumblebee.load_tokenizer({:local, @model_dir})
    %{model: model, tokenizer: tokenizer, texts: texts, expected: Nx.tensor(expected, type: :f64)}
  end

  defp serving(ctx, batch_size) do
    Bumblebee.Text.text_embedding(ctx.model, ctx.tokenizer,
      output_pool: :mean_pooling,
      output_attribute: :hidden_state,
      embedding_processor: :l2_norm,
      compile: [batch_size: batch_size, sequence_length: 96],
      defn_options: [compiler: Emily.Compiler, device: @device]
    )
  end

  defp assert_close(embeddings, expected) do
    got = embeddings |> Nx.backend_transfer(Nx.BinaryBackend) |> Nx.as_type(:f64)
    norms = Nx.multiply(Nx.LinAlg.norm(got, axes: [1]), Nx.LinAlg.norm(expected, axes: [1]))
    cosine = Nx.divide(Nx.sum(Nx.multiply(got, expected), axes: [1]), norms)
    min_cosine = cosine |> Nx.reduce_min() |> Nx.to_number()
    max_abs = Nx.subtract(got, expected) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()

    if System.get_env("EMILY_PRINT_ERRORS"),
      do: IO.puts("min cosine #{min_cosine}, max abs error #{max_abs}")

    assert min_cosine >= 0.99999, "min cosine #{min_cosine}"
    assert max_abs <= 1.0e-5, "max abs error #{max_abs}"
  end

  test "embeddings match sentence-transformers, every text padded into one batch", ctx do
    results = Nx.Serving.run(serving(ctx, length(ctx.texts)), ctx.texts)
    assert_close(Nx.stack(Enum.map(results, & &1.embedding)), ctx.expected)
  end

  test "batches of 4 under a serving process, requests from concurrent clients", ctx do
    name = :"minilm_serving_#{System.unique_integer([:positive])}"
    start_supervised!({Nx.Serving, serving: serving(ctx, 4), name: name, batch_timeout: 10})

    embeddings =
      ctx.texts
      |> Task.async_stream(&Nx.Serving.batched_run(name, &1).embedding,
        max_concurrency: 12,
        timeout: 120_000
      )
      |> Enum.map(fn {:ok, embedding} -> embedding end)

    assert_close(Nx.stack(embeddings), ctx.expected)
  end
end
