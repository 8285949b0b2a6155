# A Qwen3-shaped decoder written with Nx on Emily, in one code path for a
# single process and for tensor parallelism over a communicator of n ranks
# (Emily.Distributed), with greedy generation through a KV cache.
#
# Used by test/emily/tp_decode_test.exs and bench/tp_decode_bench.exs; load
# it with Code.require_file (the returned module binaries can be shipped to
# peer nodes).
#
# Architecture (Qwen3): token embedding; per block an RMS-normed
# grouped-query self-attention with RMS norms on each head's queries and
# keys and rotary embeddings (the Hugging Face half-split form), then an
# RMS-normed SiLU-gated MLP, each added to the residual; a final RMS norm
# and the LM head (tied to the embedding or not). No biases.
#
# Tensor parallelism (Megatron's layout), rank r of n:
#
#   * q, k, v projections column-parallel by heads: rank r holds query
#     heads r·h/n .. (r+1)·h/n - 1 and KV heads r·kv/n .. (r+1)·kv/n - 1, so
#     consecutive query heads still share their KV head locally (the
#     groups do not straddle ranks), and its KV cache holds only its heads;
#   * o_proj row-parallel (the rows of its heads): each rank's product is a
#     partial sum of the attention output, and one all_sum per attention
#     gives every rank the whole;
#   * gate and up column-parallel by intermediate units, down row-parallel:
#     one all_sum per MLP;
#   * embedding and norms replicated;
#   * LM head vocab-parallel (config lm_head: :vocab_parallel, the
#     default; :replicated keeps the whole head on every rank and needs no
#     collective): rank r computes the logits of its contiguous
#     slice of the vocabulary (padded with zero rows to a multiple of n),
#     an all_gather joins them, the padding is cut off and every rank takes
#     the argmax of the same bytes. This halves the largest matrix-vector
#     product of the step on 2 ranks (151,936 x 1024 for Qwen3-0.6B: a
#     quarter of its weights) for one all_gather of vocab-many logits.
#
# So a step has 2 all_sums per block and one all_gather; every rank holds
# bit-identical activations after each all_sum (the ring all-reduce copies
# one sum everywhere), hence identical tokens and logits. Against one
# process the logits differ in the last bits: the row-parallel products
# are summed over half of the features on each rank and the halves added,
# a different rounding order from one reduction over all of them.
#
# A step is one Emily.Compiler program (collectives inside) taking the
# parameters, the KV caches, the token ids {1, t} and the position offset
# (a scalar tensor, so every decode step replays the same program), and
# returning the logits of the last position, the greedy next token, the
# caches and the next offset: the decode loop feeds its outputs back
# without reading anything on the host until the end.
defmodule Examples.Qwen3TP do
  @moduledoc false

  import Nx.Defn, only: [defn: 2]

  alias Emily.Distributed

  @doc "The Qwen3-0.6B shapes; `overrides` replaces any of them."
  def config(overrides \\ []) do
    base = %{
      vocab: 151_936,
      hidden: 1024,
      layers: 28,
      heads: 16,
      kv_heads: 8,
      head_dim: 128,
      intermediate: 3072,
      rope_base: 1_000_000.0,
      eps: 1.0e-6,
      tied: true,
      max_len: 512,
      type: :bf16,
      # :vocab_parallel (each rank a slice of the vocabulary, all_gather) or
      # :replicated (every rank the whole head, no collective)
      lm_head: :vocab_parallel,
      # parameters uniform with this standard deviation (norm weights: 1 ± 0.1)
      init_std: 0.02
    }

    Map.merge(base, Map.new(overrides))
  end

  # ---- parameters ------------------------------------------------------------

  @doc """
  Random full (unsharded) parameters of `config`, the same on every node
  for a given `seed`: each element a hash of its index and the tensor's
  number, drawn by one compiled program per shape on `device`.
  """
  def init_params(config, seed, device \\ :cpu) do
    draw = Nx.Defn.jit(&hash_uniform/3, compiler: Emily.Compiler, device: device)
    counter = :counters.new(1, [])
    h = config.hidden
    q = config.heads * config.head_dim
    kv = config.kv_heads * config.head_dim

    matrix = fn shape ->
      :counters.add(counter, 1, 1)
      n = :counters.get(counter, 1) + 1000 * seed
      half = config.init_std * :math.sqrt(3)
      evaluated(draw.(Nx.template(shape, :u8), n, center: 0.0, half: half, type: config.type))
    end

    norm = fn size ->
      :counters.add(counter, 1, 1)
      n = :counters.get(counter, 1) + 1000 * seed
      evaluated(draw.(Nx.template({size}, :u8), n, center: 1.0, half: 0.1, type: config.type))
    end

    layers =
      for _ <- 1..config.layers do
        %{
          input_norm: norm.(h),
          q: matrix.({h, q}),
          k: matrix.({h, kv}),
          v: matrix.({h, kv}),
          q_norm: norm.(config.head_dim),
          k_norm: norm.(config.head_dim),
          o: matrix.({q, h}),
          post_norm: norm.(h),
          gate: matrix.({h, config.intermediate}),
          up: matrix.({h, config.intermediate}),
          down: matrix.({config.intermediate, h})
        }
      end

    embed = matrix.({config.vocab, h})
    head = if config.tied, do: embed, else: matrix.({config.vocab, h})
    %{embed: embed, head: head, final_norm: norm.(h), layers: List.to_tuple(layers)}
  end

  defn hash_uniform(template, seed, opts \\ []) do
    x = Nx.iota(Nx.shape(template), type: :u32) + Nx.as_type(seed, :u32) * 0x9E3779B9
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 16)) * 0x85EBCA6B
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 13)) * 0xC2B2AE35
    x = Nx.bitwise_xor(x, Nx.right_shift(x, 16))
    u = Nx.as_type(x, :f32) / 4_294_967_296.0 - 0.5
    Nx.as_type(opts[:center] + u * (2 * opts[:half]), opts[:type])
  end

  defp evaluated(t) do
    :ok = Emily.eval(t.data.ref)
    t
  end

  @doc """
  This rank's parameters cut from the full ones (`comm` nil: one process,
  the parameters as they are). Column-parallel weights are split along
  their output axis (1), row-parallel ones along their input axis (0);
  the LM head's vocabulary rows are padded with zeros to a multiple of the
  ranks and split.
  """
  def shard_params(full, comm, config) do
    check_divisible!(config, comm)
    column = &Distributed.shard(&1, comm, 1)
    row = &Distributed.shard(&1, comm, 0)

    layers =
      full.layers
      |> Tuple.to_list()
      |> Enum.map(fn l ->
        %{
          l
          | q: column.(l.q),
            k: column.(l.k),
            v: column.(l.v),
            o: row.(l.o),
            gate: column.(l.gate),
            up: column.(l.up),
            down: row.(l.down)
        }
      end)

    %{
      embed: full.embed,
      head: shard_head(full.head, comm, config),
      final_norm: full.final_norm,
      layers: layers |> Enum.map(&evaluate_all/1) |> List.to_tuple()
    }
  end

  defp shard_head(head, _comm, %{lm_head: :replicated}), do: head

  defp shard_head(head, comm, %{lm_head: :vocab_parallel} = config) do
    head
    |> pad_rows(padded_vocab(config, comm))
    |> Distributed.shard(comm, 0)
    |> evaluated()
  end

  defp evaluate_all(map), do: Map.new(map, fn {k, t} -> {k, evaluated(t)} end)

  defp ranks(nil), do: 1
  defp ranks(comm), do: comm.size

  defp padded_vocab(config, comm) do
    n = ranks(comm)
    div(config.vocab + n - 1, n) * n
  end

  defp pad_rows(t, rows) do
    case rows - elem(t.shape, 0) do
      0 -> t
      extra -> Nx.pad(t, Nx.tensor(0, type: t.type), [{0, extra, 0}, {0, 0, 0}])
    end
  end

  defp check_divisible!(config, comm) do
    n = ranks(comm)

    for {what, value} <- [
          heads: config.heads,
          kv_heads: config.kv_heads,
          intermediate: config.intermediate
        ],
        rem(value, n) != 0 do
      raise ArgumentError, "Qwen3TP: #{what} (#{value}) must be divisible by the #{n} ranks"
    end

    :ok
  end

  @doc "Zeroed KV caches of this rank's KV heads: a tuple of {k, v} per layer."
  def empty_cache(config, comm, device \\ :cpu) do
    shape = {1, div(config.kv_heads, ranks(comm)), config.max_len, config.head_dim}
    zero = Nx.tensor(0, type: config.type, backend: {Emily.Backend, device: device})
    zeros = evaluated(Nx.broadcast(zero, shape))
    List.duplicate({zeros, zeros}, config.layers) |> List.to_tuple()
  end

  # ---- the step ----------------------------------------------------------------

  @doc """
  The compiled step for `comm` (nil: one process) on `device`:
  `step.(params, cache, ids, offset)` with ids `{1, t}` (s32) at positions
  `offset .. offset + t - 1` gives `{logits, token, cache, offset + t}`,
  logits `{1, vocab}` and token `{1, 1}` (s32) of the last position.

  Each length t is compiled once (`Nx.Defn.compile/3`, remembered in the
  calling process): a call then costs a third of an `Nx.Defn.jit/2` call,
  which looks its program up from the templates of every argument, some
  370 tensors for 28 layers (~0.2 against ~0.8 ms on the development
  machine). `opts` go to the compiler (e.g. `cuda_graph: true`).
  """
  def step_fun(config, comm, device \\ :cpu, opts \\ []) do
    key = {__MODULE__, make_ref()}
    compile_opts = [compiler: Emily.Compiler, device: device] ++ opts
    forward = &forward(&1, &2, &3, &4, comm, config)

    fn params, cache, ids, offset ->
      compiled =
        case Process.get({key, ids.shape}) do
          nil ->
            templates = [params, cache, ids, offset]
            compiled = Nx.Defn.compile(forward, templates, compile_opts)
            Process.put({key, ids.shape}, compiled)
            compiled

          compiled ->
            compiled
        end

      compiled.(params, cache, ids, offset)
    end
  end

  @doc false
  # Written with Nx functions on the defn expression (Emily.Fast and
  # Emily.Distributed are deftransforms), so that the loop over the layers
  # unrolls at trace time.
  def forward(params, cache, ids, offset, comm, config) do
    {1, t} = ids.shape
    x = Nx.take(params.embed, ids, axis: 0)

    # key j is visible to query i when j <= offset + i (causal over the
    # cache; slots past the written positions are masked out)
    query_pos = Nx.add(Nx.iota({t, 1}, type: :s32), offset)
    mask = Nx.less_equal(Nx.iota({1, 1, t, config.max_len}, axis: 3, type: :s32), query_pos)

    {x, cache} =
      params.layers
      |> Tuple.to_list()
      |> Enum.zip(Tuple.to_list(cache))
      |> Enum.map_reduce(x, fn {layer, layer_cache}, x ->
        {x, layer_cache} = block(x, layer, layer_cache, offset, mask, comm, config)
        {layer_cache, x}
      end)
      |> then(fn {caches, x} -> {x, List.to_tuple(caches)} end)

    last = x |> Nx.slice_along_axis(t - 1, 1, axis: 1) |> Nx.reshape({1, config.hidden})
    last = Emily.Fast.rms_norm(last, params.final_norm, eps: config.eps)
    local_logits = Nx.dot(last, [1], params.head, [1])

    logits =
      if ranks(comm) > 1 and config.lm_head == :vocab_parallel do
        local_logits
        |> Distributed.all_gather(comm, axis: 1)
        |> Nx.slice_along_axis(0, config.vocab, axis: 1)
      else
        local_logits
      end

    token =
      logits |> Nx.argmax(axis: 1, tie_break: :low) |> Nx.as_type(:s32) |> Nx.reshape({1, 1})

    {logits, token, cache, Nx.add(offset, t)}
  end

  defp block(x, w, {k_cache, v_cache}, offset, mask, comm, config) do
    {1, t, _} = x.shape
    hd = config.head_dim
    heads = div(config.heads, ranks(comm))
    kv_heads = div(config.kv_heads, ranks(comm))

    h = Emily.Fast.rms_norm(x, w.input_norm, eps: config.eps)
    q = h |> Nx.dot(w.q) |> split_heads(heads, hd)
    k = h |> Nx.dot(w.k) |> split_heads(kv_heads, hd)
    v = h |> Nx.dot(w.v) |> split_heads(kv_heads, hd)
    q = q |> Emily.Fast.rms_norm(w.q_norm, eps: config.eps) |> rope(offset, config)
    k = k |> Emily.Fast.rms_norm(w.k_norm, eps: config.eps) |> rope(offset, config)

    k_cache = Nx.put_slice(k_cache, [0, 0, offset, 0], k)
    v_cache = Nx.put_slice(v_cache, [0, 0, offset, 0], v)

    attention =
      q
      |> Emily.Fast.scaled_dot_product_attention_with_mask(k_cache, v_cache, mask)
      |> Nx.transpose(axes: [0, 2, 1, 3])
      |> Nx.reshape({1, t, heads * hd})

    x = Nx.add(x, attention |> Nx.dot(w.o) |> sum_ranks(comm))

    h = Emily.Fast.rms_norm(x, w.post_norm, eps: config.eps)
    gate = Nx.dot(h, w.gate)
    mlp = gate |> Nx.multiply(Nx.sigmoid(gate)) |> Nx.multiply(Nx.dot(h, w.up)) |> Nx.dot(w.down)
    {Nx.add(x, sum_ranks(mlp, comm)), {k_cache, v_cache}}
  end

  # {1, t, heads * hd} -> {1, heads, t, hd}
  defp split_heads(x, heads, hd) do
    {1, t, _} = x.shape
    x |> Nx.reshape({1, t, heads, hd}) |> Nx.transpose(axes: [0, 2, 1, 3])
  end

  defp rope(x, offset, config),
    do: Emily.Fast.rope(x, offset, dims: config.head_dim, base: config.rope_base)

  # The row-parallel layers' partial sums: one all_sum (nothing on one rank).
  defp sum_ranks(x, comm) when is_nil(comm) or comm.size == 1, do: x
  defp sum_ranks(x, comm), do: Distributed.all_sum(x, comm)

  # ---- generation ----------------------------------------------------------------

  @doc """
  Greedy generation of `count` tokens after `prompt` (a list of ids): one
  prefill step on the whole prompt, whose token is read (a wait), then
  `count - 1` decode steps, each an asynchronous evaluation fed with the
  previous step's outputs on the device, and one read of all the tokens
  at the end.

  Returns `%{tokens: [id], logits: [tensor {1, vocab}] | nil, prefill_us,
  decode_us}`: `:logits` keeps every step's logits when `keep_logits:
  true`; `decode_us` is the time of the `count - 1` decode steps.
  """
  def generate(step, params, cache, prompt, count, opts \\ []) do
    config = Keyword.fetch!(opts, :config)
    device = Keyword.get(opts, :device, :cpu)
    keep_logits = Keyword.get(opts, :keep_logits, false)

    if count < 1 or length(prompt) + count - 1 > config.max_len do
      raise ArgumentError,
            "Qwen3TP.generate: #{length(prompt)} prompt + #{count} new tokens do not fit " <>
              "the KV cache of #{config.max_len}"
    end

    backend = {Emily.Backend, device: device}
    ids = Nx.tensor([prompt], type: :s32, backend: backend)
    offset = Nx.tensor(0, type: :s32, backend: backend)

    start = System.monotonic_time(:microsecond)
    {logits, token, cache, offset} = step.(params, cache, ids, offset)
    async_eval([logits, token, offset | cache_tensors(cache)])
    first = token |> Nx.to_flat_list() |> hd()
    prefilled = System.monotonic_time(:microsecond)

    {steps, _state} =
      Enum.map_reduce(2..count//1, {token, cache, offset}, fn _, {ids, cache, offset} ->
        {logits, token, cache, offset} = step.(params, cache, ids, offset)
        async_eval([logits, token, offset | cache_tensors(cache)])
        {{token, if(keep_logits, do: logits)}, {token, cache, offset}}
      end)

    rest = Enum.map(steps, fn {token, _} -> token |> Nx.to_flat_list() |> hd() end)
    done = System.monotonic_time(:microsecond)

    %{
      tokens: [first | rest],
      logits: if(keep_logits, do: [logits | Enum.map(steps, &elem(&1, 1))]),
      prefill_us: prefilled - start,
      decode_us: done - prefilled
    }
  end

  defp cache_tensors(cache),
    do: cache |> Tuple.to_list() |> Enum.flat_map(&Tuple.to_list/1)

  defp async_eval(tensors), do: :ok = Emily.async_eval(Enum.map(tensors, & &1.data.ref))
end
