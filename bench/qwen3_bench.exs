# Bumblebee's Qwen3 on Emily (Emily.Compiler), a Qwen3-0.6B-shaped model
# (28 layers, hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, vocab
# 151936, tied embeddings, q/k RMS norms) with random bf16 parameters:
# greedy generation through Bumblebee.Text.Generation.build_generate (what
# Bumblebee's generation serving runs), batch 1. Prompt processing is timed
# as a generation of one new token; decoding as the extra time of N more
# tokens (no end-of-sequence token, so every run generates them all).
# Median of --runs after a warm-up (the warm-up compiles). The PyTorch
# counterpart is bench/qwen3_torch.py (same shapes and flags).
#
#   mix run bench/qwen3_bench.exs [--gpu] [--tokens N] [--prompt N] [--layers N] [--runs N] [--stock] [--cuda-graph]
#
# --tokens: new tokens decoded (default 64); --prompt: prompt tokens
# (default 128); --layers: transformer blocks (default 28; --layers 2 for a
# CPU smoke run); --stock: Bumblebee's graph as is (default: RMS norms on
# Emily.Fast kernels, Emily.Bumblebee.FastKernels); --cuda-graph: the
# decode loop's body replayed as one CUDA graph per token (Emily.Compiler's
# `cuda_graph: true`).

{flags, _, _} =
  OptionParser.parse(System.argv(),
    strict: [
      gpu: :boolean,
      tokens: :integer,
      prompt: :integer,
      layers: :integer,
      runs: :integer,
      stock: :boolean,
      cuda_graph: :boolean
    ]
  )

device = if flags[:gpu], do: :gpu, else: :cpu
new_tokens = flags[:tokens] || 64
prompt_length = flags[:prompt] || 128
layers = flags[:layers] || 28
runs = flags[:runs] || 5
Nx.global_default_backend({Emily.Backend, device: device})

spec =
  Bumblebee.configure(Bumblebee.Text.Qwen3,
    architecture: :for_causal_language_modeling,
    vocab_size: 151_936,
    max_positions: 40_960,
    hidden_size: 1024,
    intermediate_size: 3072,
    attention_head_size: 128,
    num_blocks: layers,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    rotary_embedding_base: 1_000_000,
    layer_norm_epsilon: 1.0e-6,
    tie_word_embeddings: true
  )

# bf16 parameters and compute: the policy Bumblebee.load_model(..., type:
# :bf16) applies, applied after FastKernels' rewrite so that the rewritten
# norm layers get it too (rewritten after the policy, they would keep f32
# weights and outputs).
model = Bumblebee.build_model(spec)
model = if flags[:stock], do: model, else: Emily.Bumblebee.FastKernels.apply(model)
bf16 = Axon.MixedPrecision.create_policy(params: {:bf, 16}, compute: {:bf, 16}, output: {:bf, 16})
model = Axon.MixedPrecision.apply_policy(model, bf16)
graph = if flags[:stock], do: "stock graph", else: "FastKernels"

# Random parameters, drawn fast: each element a hash of its index (uniform,
# std 0.02, as the model's initializer; RMS-norm weights around 1), one
# Emily.Compiler program per shape. Axon's own initializers (threefry
# normals) take minutes for 600M values on a CPU.
defmodule Qwen3Bench.Params do
  import Nx.Defn

  defn hash_uniform(shape_template, seed, opts \\ []) do
    x = Nx.iota(Nx.shape(shape_template), type: :u32) + Nx.as_type(seed, :u32) * 0x9E3779B9
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 16)) * 0x85EBCA6B
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 13)) * 0xC2B2AE35
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 16))
    u = Nx.as_type(x, :f32) / 4_294_967_296.0 - 0.5
    Nx.as_type(opts[:center] + u * (2 * opts[:half_width]), opts[:type])
  end
end

{init_us, params} =
  :timer.tc(fn ->
    template = %{"input_ids" => Nx.template({1, 1}, :s64)}
    state = Axon.trace_init(model, template)
    draw = Nx.Defn.jit(&Qwen3Bench.Params.hash_uniform/3, compiler: Emily.Compiler)
    counter = :counters.new(1, [])

    data =
      Bumblebee.Utils.Nx.map(state.data, fn t ->
        :counters.add(counter, 1, 1)
        seed = :counters.get(counter, 1)
        shape = Nx.template(Nx.shape(t), :u8)
        # Rank 1: the RMS-norm weights (Qwen3's layers have no biases).
        {center, half} = if Nx.rank(t) == 1, do: {1.0, 0.1}, else: {0.0, 0.02 * :math.sqrt(3)}
        p = draw.(shape, seed, center: center, half_width: half, type: Nx.type(t))
        # Computed now (Emily is lazy), so that the timings below do not draw them.
        Emily.eval(p.data.ref)
        p
      end)

    # Tied embeddings: the head reads the embedding table, as the loaded
    # model does (both names map to model.embed_tokens).
    data =
      put_in(
        data,
        ["language_modeling_head.output", "kernel"],
        data["embedder.token_embedding"]["kernel"]
      )

    %{state | data: data}
  end)

{count, types} =
  params.data
  |> Enum.flat_map(fn {_layer, ps} -> Map.values(ps) end)
  |> Enum.uniq_by(& &1.data.ref)
  |> Enum.reduce({0, MapSet.new()}, fn t, {n, types} ->
    {n + Nx.size(t), MapSet.put(types, Nx.type(t))}
  end)

embedding = params.data["embedder.token_embedding"]["kernel"] |> Nx.as_type(:f32)

[lo, hi, sd] =
  Enum.map(
    [Nx.reduce_min(embedding), Nx.reduce_max(embedding), Nx.standard_deviation(embedding)],
    &Nx.to_number/1
  )

IO.puts(
  "parameters: #{:erlang.float_to_binary(count / 1.0e6, decimals: 1)}M, " <>
    "embedding in [#{Float.round(lo, 4)}, #{Float.round(hi, 4)}], std #{Float.round(sd, 4)}, " <>
    "#{inspect(MapSet.to_list(types))}, drawn in #{:erlang.float_to_binary(init_us / 1.0e6, decimals: 1)} s"
)

# Token ids spread over the vocabulary (no tokenizer needed).
prompt = Nx.iota({1, prompt_length}) |> Nx.multiply(7919) |> Nx.remainder(151_936)

inputs = %{
  "input_ids" => prompt,
  "attention_mask" => Nx.broadcast(1, {1, prompt_length}),
  "seed" => Nx.tensor([0])
}

time = fn generated ->
  config =
    Bumblebee.configure(Bumblebee.Text.GenerationConfig,
      max_new_tokens: generated,
      pad_token_id: 0
    )

  generate = Bumblebee.Text.Generation.build_generate(model, spec, config)
  jitted = Nx.Defn.jit(generate, compiler: Emily.Compiler, cuda_graph: !!flags[:cuda_graph])
  # The ids are read back: that waits for the lazy result.
  run = fn -> jitted.(params, inputs).token_ids |> Nx.to_flat_list() end
  run.()

  times =
    for _ <- 1..runs do
      {us, ids} = :timer.tc(run)
      ^generated = length(ids)
      us / 1000
    end

  times |> Enum.sort() |> Enum.at(div(runs, 2))
end

prefill_ms = time.(1)
total_ms = time.(new_tokens + 1)
decode_tps = new_tokens / ((total_ms - prefill_ms) / 1000)
fmt = fn x, d -> :erlang.float_to_binary(x / 1, decimals: d) end

row = fn label, ms, tps, d ->
  String.pad_trailing(label, 32) <>
    String.pad_leading(fmt.(ms, 1), 10) <>
    " ms" <>
    String.pad_leading(fmt.(tps, d), 10) <> " tok/s"
end

IO.puts("""
Emily (#{device}, #{graph}#{if flags[:cuda_graph], do: ", CUDA graph per token"}): Qwen3-0.6B-shaped, #{layers} layers, random bf16, batch 1
  #{row.("prompt #{prompt_length} tokens + first token", prefill_ms, prompt_length / (prefill_ms / 1000), 0)}
  #{row.("decode #{new_tokens} tokens", total_ms - prefill_ms, decode_tps, 1)}\
""")
