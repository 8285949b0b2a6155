defmodule Emily.Bumblebee.FastKernelsTest do
  # Emily.Bumblebee.FastKernels against the stock graph: the same model with
  # its norms, rotary embeddings and attention on Emily.Fast kernels gives
  # the stock outputs to float rounding, for a prefill and through cached
  # greedy generation (token-identical). Small random-weight Llama, Qwen3,
  # Mistral, T5 and BERT specs cover the rewrites (every rotary scaling
  # strategy, grouped heads, sliding window, relative bias, cross-attention,
  # head mask, padded batches); the real models (all-MiniLM-L6-v2,
  # SmolLM2) come from scripts/fetch_models.sh (run by setup) and are
  # skipped without them.
  use ExUnit.Case, async: false

  alias Emily.Bumblebee.FastKernels

  @moduletag :bumblebee
  @models System.get_env("EMILY_MODELS") || Path.expand("~/.cache/emily/models")
  @minilm Path.join(@models, "all-minilm-l6-v2")
  @smollm2 Path.join([@models, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"])

  defp max_rel_error(a, b) do
    [a, b] = Enum.map([a, b], &(&1 |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.as_type(:f64)))
    err = Nx.subtract(a, b) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    err / (Nx.abs(b) |> Nx.reduce_max() |> Nx.to_number())
  end

  defp predict(model, params, inputs) do
    {_, predict} = Axon.build(model, compiler: Emily.Compiler)
    predict.(params, inputs)
  end

  # Seeded: each run checks the same random weights.
  defp init(model, inputs) do
    {init, _} = Axon.build(model, compiler: Emily.Compiler, seed: 17)
    init.(inputs, Axon.ModelState.empty())
  end

  defp count_ops(model, op_name) do
    model |> Axon.properties() |> Enum.count(fn {_name, op} -> op == op_name end)
  end

  # Greedy generation of `n` tokens (the KV cache path: a prefill, then
  # one-token decode steps against the whole cache and its key mask).
  defp generate(model, spec, params, inputs, n) do
    config =
      Bumblebee.configure(Bumblebee.Text.GenerationConfig,
        max_new_tokens: n,
        pad_token_id: 0,
        bos_token_id: 1,
        eos_token_id: -1,
        decoder_start_token_id: 0
      )

    generate = Bumblebee.Text.Generation.build_generate(model, spec, config)
    seed = Nx.broadcast(0, {Nx.axis_size(inputs["input_ids"], 0)})
    out = Nx.Defn.jit(generate, compiler: Emily.Compiler).(params, Map.put(inputs, "seed", seed))
    Nx.to_list(out.token_ids)
  end

  defp tiny_decoder(module, opts) do
    Bumblebee.configure(
      module,
      [
        architecture: :for_causal_language_modeling,
        vocab_size: 64,
        hidden_size: 32,
        intermediate_size: 48,
        num_blocks: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        max_positions: 64
      ] ++ opts
    )
  end

  # Two rows, the second left-padded as Bumblebee's generation pads.
  defp decoder_inputs do
    ids = Nx.tensor([[1, 5, 9, 3, 7, 2, 11, 4, 6, 8], [0, 0, 0, 5, 9, 3, 8, 1, 12, 2]])
    %{"input_ids" => ids, "attention_mask" => Nx.not_equal(ids, 0)}
  end

  # The logits of the kept tokens (padding rows attend to no real token).
  defp kept_logits(logits, inputs) do
    mask = inputs["attention_mask"] |> Nx.new_axis(-1) |> Nx.broadcast(logits.shape)
    Nx.select(mask, logits, 0.0)
  end

  defp check_decoder(spec, opts \\ []) do
    model = Bumblebee.build_model(spec)
    {fast, summary} = FastKernels.rewrite(model)
    blocks = spec.num_blocks
    assert %{rotary_embedding: ^blocks, attention: ^blocks, attention_skipped: 0} = summary
    assert count_ops(fast, :scaled_dot_product_attention) == blocks
    assert count_ops(fast, :rotary_embedding) == blocks

    inputs = decoder_inputs()
    params = init(model, inputs)
    want = predict(model, params, inputs).logits
    got = predict(fast, params, inputs).logits
    assert max_rel_error(kept_logits(got, inputs), kept_logits(want, inputs)) < 1.0e-5

    if opts[:generate] do
      assert generate(fast, spec, params, inputs, 16) == generate(model, spec, params, inputs, 16)
    end

    {model, params, want}
  end

  test "tiny Llama (grouped heads): prefill logits and cached greedy generation, padded batch" do
    check_decoder(tiny_decoder(Bumblebee.Text.Llama, []), generate: true)
  end

  test "tiny Qwen3 (query/key norms, head size 16): prefill and cached greedy generation" do
    spec = tiny_decoder(Bumblebee.Text.Qwen3, attention_head_size: 16)
    check_decoder(spec, generate: true)
  end

  test "tiny Mistral (sliding window of 3): prefill and cached greedy generation" do
    check_decoder(tiny_decoder(Bumblebee.Text.Mistral, attention_window_size: 3), generate: true)
  end

  test ":only picks the kinds rewritten" do
    model = Bumblebee.build_model(tiny_decoder(Bumblebee.Text.Llama, []))
    {_, all} = FastKernels.rewrite(model)
    {_, norms} = FastKernels.rewrite(model, only: [:norms])
    {_, attention} = FastKernels.rewrite(model, only: [:attention])
    assert all.rms_norm > 0 and all.rotary_embedding > 0 and all.attention > 0
    assert %{rotary_embedding: 0, attention: 0} = norms
    assert norms.rms_norm == all.rms_norm
    assert %{rms_norm: 0, rotary_embedding: 0} = attention
    assert attention.attention == all.attention
  end

  test "rewritten layers keep the stock layers' precision (a bf16 model stays bf16)" do
    spec = tiny_decoder(Bumblebee.Text.Qwen3, attention_head_size: 16)
    model = Bumblebee.build_model(spec, type: :bf16)

    policies = fn model, ops ->
      model
      |> Axon.reduce_nodes([], fn node, acc -> [{node.op_name, node.policy.compute} | acc] end)
      |> Enum.filter(fn {op, _} -> op in ops end)
      |> Enum.uniq()
      |> Enum.sort()
    end

    assert policies.(model, [:rms_norm]) == [rms_norm: {:bf, 16}]
    fast = FastKernels.apply(model)
    assert policies.(fast, [:rms_norm, :custom]) == [custom: {:bf, 16}, rms_norm: {:bf, 16}]
  end

  test "tiny T5 (relative bias, cross-attention, encoder-decoder cache): logits and generation" do
    spec =
      Bumblebee.configure(Bumblebee.Text.T5,
        architecture: :for_conditional_generation,
        vocab_size: 64,
        hidden_size: 16,
        intermediate_size: 32,
        attention_head_size: 8,
        encoder_num_blocks: 2,
        decoder_num_blocks: 2,
        encoder_num_attention_heads: 2,
        decoder_num_attention_heads: 2,
        relative_attention_num_buckets: 8,
        relative_attention_max_distance: 16
      )

    model = Bumblebee.build_model(spec)
    {fast, summary} = FastKernels.rewrite(model)
    # Encoder self-attention, decoder self- and cross-attention, 2 blocks each.
    assert %{attention: 6, attention_skipped: 0} = summary

    ids = Nx.tensor([[5, 9, 3, 7, 2, 11, 4, 1], [5, 9, 3, 8, 1, 0, 0, 0]])
    decoder_ids = Nx.tensor([[0, 6, 7], [0, 8, 9]])

    inputs = %{
      "input_ids" => ids,
      "attention_mask" => Nx.not_equal(ids, 0),
      "decoder_input_ids" => decoder_ids
    }

    params = init(model, inputs)
    want = predict(model, params, inputs).logits
    got = predict(fast, params, inputs).logits
    assert max_rel_error(got, want) < 1.0e-5

    inputs = Map.delete(inputs, "decoder_input_ids")
    assert generate(fast, spec, params, inputs, 8) == generate(model, spec, params, inputs, 8)
  end

  test "rotary scaling strategies: linear, dynamic, llama3 and longrope" do
    base = tiny_decoder(Bumblebee.Text.Llama, max_positions: 8)
    {_model, _params, default} = check_decoder(base)

    for strategy <- [
          %{type: :linear, factor: 2.0},
          # dynamic only acts beyond max_positions (8): the inputs have 10
          %{type: :dynamic, factor: 3.0},
          %{
            type: :llama3,
            factor: 8.0,
            low_frequency_factor: 1.0,
            high_frequency_factor: 4.0,
            original_max_positions: 4
          },
          %{
            type: :longrope,
            short_factor: [1.0, 1.5, 2.0, 3.0],
            long_factor: [2.0, 3.0, 5.0, 9.0],
            original_max_positions: 4
          }
        ] do
      {_model, _params, want} =
        check_decoder(%{base | rotary_embedding_scaling_strategy: strategy})

      # The strategy changes the stock result (so the rewrite had to follow it).
      assert max_rel_error(want, default) > 1.0e-4, "#{strategy.type} changes nothing"
    end
  end

  # Other architectures built on the same layers: partial rotary (GPT-NeoX,
  # Phi), LongRoPE (Phi3), rotary encoders with a padded batch (NomicBERT,
  # ModernBERT: its alternating sliding windows, and its own bias-free layer
  # norm, which stays), Gemma 3 (query/key norms, local and global layers).
  test "GPT-NeoX, Phi, Phi3, NomicBERT, ModernBERT and Gemma 3: the stock outputs" do
    tiny = [vocab_size: 64, hidden_size: 32, intermediate_size: 48, num_blocks: 2]
    tiny = tiny ++ [num_attention_heads: 4]

    longrope = %{
      type: :longrope,
      short_factor: [1.0, 1.5, 2.0, 3.0],
      long_factor: [2.0, 3.0, 5.0, 9.0],
      original_max_positions: 4
    }

    cases = [
      {Bumblebee.Text.GptNeoX, :for_causal_language_modeling, [rotary_embedding_percentage: 0.5]},
      {Bumblebee.Text.Phi, :for_causal_language_modeling, [rotary_embedding_percentage: 0.5]},
      {Bumblebee.Text.Phi3, :for_causal_language_modeling,
       [
         activation: :silu,
         num_key_value_heads: 2,
         max_positions: 8,
         rotary_embedding_scaling_strategy: longrope
       ]},
      {Bumblebee.Text.NomicBert, :base, []},
      {Bumblebee.Text.ModernBert, :base, []},
      {Bumblebee.Text.Gemma3Text, :for_causal_language_modeling,
       [num_key_value_heads: 2, attention_head_size: 8]}
    ]

    ids = Nx.tensor([[1, 5, 9, 3, 7, 2, 11, 4, 6, 8], [3, 5, 9, 3, 8, 1, 12, 2, 0, 0]])
    inputs = %{"input_ids" => ids, "attention_mask" => Nx.not_equal(ids, 0)}

    for {module, architecture, opts} <- cases do
      spec = Bumblebee.configure(module, [architecture: architecture] ++ tiny ++ opts)
      model = Bumblebee.build_model(spec)
      {fast, summary} = FastKernels.rewrite(model)
      assert %{rotary_embedding: 2, attention: 2, attention_skipped: 0} = summary

      if module == Bumblebee.Text.ModernBert, do: assert(summary.layer_norm == 0)

      params = init(model, inputs)
      output = if architecture == :base, do: :hidden_state, else: :logits
      want = Map.fetch!(predict(model, params, inputs), output)
      got = Map.fetch!(predict(fast, params, inputs), output)
      assert max_rel_error(got, want) < 1.0e-5, inspect(module)
    end
  end

  defp tiny_bert do
    # Bumblebee's default attention dropout (0.1) stays: it acts in training only.
    Bumblebee.configure(Bumblebee.Text.Bert,
      architecture: :base,
      vocab_size: 50,
      hidden_size: 16,
      num_blocks: 2,
      num_attention_heads: 2,
      intermediate_size: 32
    )
  end

  test "tiny BERT: hidden states of a padded batch; training mode keeps the stock dropout" do
    model = Bumblebee.build_model(tiny_bert())
    {fast, summary} = FastKernels.rewrite(model)
    assert %{attention: 2, attention_skipped: 0, layer_norm: 5, rotary_embedding: 0} = summary
    assert count_ops(fast, :scaled_dot_product_attention) == 2

    ids = Nx.tensor([[2, 7, 9, 3, 11, 4], [2, 5, 8, 4, 0, 0]])
    inputs = %{"input_ids" => ids, "attention_mask" => Nx.not_equal(ids, 0)}
    params = init(model, inputs)
    want = predict(model, params, inputs).hidden_state
    got = predict(fast, params, inputs).hidden_state
    assert max_rel_error(got, want) < 1.0e-5

    # A head mask ({blocks, heads}) scales each head's share.
    head_mask = %{"attention_head_mask" => Nx.tensor([[1.0, 0.0], [0.5, 1.0]])}
    masked = predict(model, params, Map.merge(inputs, head_mask)).hidden_state
    assert max_rel_error(masked, want) > 1.0e-3
    got = predict(fast, params, Map.merge(inputs, head_mask)).hidden_state
    assert max_rel_error(got, masked) < 1.0e-5

    # Training carries dropout keys, initialised by a training build.
    {train_init, _} = Axon.build(model, compiler: Emily.Compiler, mode: :train)
    train_params = train_init.(inputs, params)

    train = fn model ->
      {_, predict} = Axon.build(model, compiler: Emily.Compiler, mode: :train)
      predict.(train_params, inputs).prediction.hidden_state
    end

    train_want = train.(model)
    assert max_rel_error(train_want, want) > 1.0e-3, "dropout changes nothing in training"
    assert max_rel_error(train.(fast), train_want) < 1.0e-6
  end

  test "apply/1 reports the counts as a telemetry event" do
    ref = make_ref()
    me = self()

    :telemetry.attach(
      "fast-kernels-test",
      [:emily, :bumblebee, :fast_kernels],
      fn _event, counts, _meta, _ -> send(me, {ref, counts}) end,
      nil
    )

    try do
      FastKernels.apply(Bumblebee.build_model(tiny_bert()))
      assert_received {^ref, %{attention: 2, attention_skipped: 0, layer_norm: 5, rms_norm: 0}}
    after
      :telemetry.detach("fast-kernels-test")
    end
  end

  @tag skip:
         if(!File.exists?(Path.join(@minilm, ".complete")),
           do: "all-MiniLM-L6-v2 is not installed"
         )
  test "all-MiniLM-L6-v2: the hidden states of the stock graph, padded batch" do
    {:ok, %{model: model, params: params}} =
      Bumblebee.load_model({:local, @minilm}, backend: Emily.Backend)

    {fast, summary} = FastKernels.rewrite(model)
    assert %{layer_norm: 13, attention: 6, attention_skipped: 0} = summary
    assert count_ops(fast, :layer_norm) == count_ops(model, :layer_norm)

    ids =
      Nx.tensor([
        [101, 7592, 2088, 2003, 1037, 3231, 1012, 102, 0, 0],
        [101, 2023, 2003, 102, 0, 0, 0, 0, 0, 0]
      ])

    inputs = %{"input_ids" => ids, "attention_mask" => Nx.not_equal(ids, 0)}
    want = predict(model, params, inputs).hidden_state
    got = predict(fast, params, inputs).hidden_state
    assert max_rel_error(got, want) < 1.0e-5
  end

  @tag skip: if(!File.exists?(@smollm2), do: "SmolLM2 is not installed")
  test "SmolLM2: the logits of the stock graph and 16 greedy tokens through the cache" do
    {:ok, %{model: model, params: params, spec: spec}} =
      Emily.Bumblebee.GGUF.load_model(@smollm2)

    {fast, summary} = FastKernels.rewrite(model)
    assert %{rms_norm: 61, rotary_embedding: 30, attention: 30, attention_skipped: 0} = summary

    ids = Nx.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198]])
    inputs = %{"input_ids" => ids, "attention_mask" => Nx.broadcast(1, ids)}
    want = predict(model, params, inputs).logits
    got = predict(fast, params, inputs).logits
    assert max_rel_error(got, want) < 1.0e-4
    assert Nx.to_flat_list(Nx.argmax(got, axis: -1)) == Nx.to_flat_list(Nx.argmax(want, axis: -1))

    assert generate(fast, spec, params, inputs, 16) == generate(model, spec, params, inputs, 16)
  end
end
