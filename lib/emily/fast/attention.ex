defmodule Emily.Fast.Attention do
  @moduledoc """
  Fused scaled dot-product attention:

      softmax(scale * q · kᵀ + mask) · v

  with queries `q` of shape `{batch, heads, q_len, head_dim}`, keys `k`
  `{batch, kv_heads, k_len, head_dim}` and values `v`
  `{batch, kv_heads, k_len, v_dim}`; the result is
  `{batch, heads, q_len, v_dim}`.

    * Grouped-query and multi-query attention: `heads` must be a multiple
      of `kv_heads`; consecutive query heads share a KV head (query head
      `i` reads KV head `div(i, heads / kv_heads)`), as MLX does.
    * `causal: true` lets query `i` see keys `j <= i + (k_len - q_len)`:
      the queries are the last `q_len` positions, as after appending them
      to a KV cache.
    * Masks broadcast to `{batch, heads, q_len, k_len}` (right-aligned).
      A `u8` mask is boolean (0 masks the key out); any other type is
      added to the scaled scores (after scaling) in the computation's type.
    * `sinks:` per-head logits (`{heads}`, `{1, heads, 1}` or
      `{1, heads, 1, 1}`) that join every row's softmax denominator only
      (attention sinks: StreamingLLM, gpt-oss).
    * A row whose keys are all masked out gives 0 (not NaN).

  The computation's type is the merged type of `q`, `k` and `v` made
  floating; the result has it. Under `Emily.Backend` and `Emily.Compiler`
  the attention is one engine kernel (`em_sdpa`: flash-attention style
  tiles with an online softmax in f32 for half types; decoding splits the
  keys across threads). Anywhere else, and for types the kernel does not
  take, it is composed from Nx operations (f32 upcast, KV heads repeated,
  causal mask from iotas), so the functions work inside `defn` on any
  backend or compiler, and `Nx.Defn.grad/2` differentiates through them.
  """

  @behaviour Emily.Block

  import Nx.Defn, only: [deftransform: 2]

  alias Emily.Backend.Util
  alias Emily.Native

  # The Nx.block/4 struct: the static configuration of one call.
  defstruct [:scale, causal: false, mask: :none, sinks: false]

  @native_types [{:f, 16}, {:bf, 16}, {:f, 32}, {:f, 64}]

  @doc """
  Scaled dot-product attention of `q`, `k` and `v` (see the module
  documentation for the shapes).

  ## Options

    * `:scale` - multiplies `q · kᵀ`. Defaults to `1 / sqrt(head_dim)`.
    * `:causal` - causal masking aligned to the end of the keys. Defaults
      to `false`.
    * `:sinks` - per-head attention sink logits, `{heads}`, `{1, heads, 1}`
      or `{1, heads, 1, 1}`. Defaults to `nil`.
    * `:mask` - as the `mask` of `scaled_dot_product_attention_with_mask/5`.
      Defaults to `nil`.
  """
  deftransform scaled_dot_product_attention(q, k, v, opts \\ []) do
    opts = Keyword.validate!(opts, scale: nil, causal: false, sinks: nil, mask: nil)
    attention(q, k, v, opts[:mask], opts)
  end

  @doc """
  Scaled dot-product attention with a `mask` broadcastable to
  `{batch, heads, q_len, k_len}` (for instance `{batch | 1, heads | 1,
  q_len, k_len}`): a `u8` mask is boolean (0 masks the key out), any other
  is added to the scaled scores. Options as
  `scaled_dot_product_attention/4` (`:scale`, `:causal`, `:sinks`); a
  causal limit combines with the mask.
  """
  deftransform scaled_dot_product_attention_with_mask(q, k, v, mask, opts \\ []) do
    opts = Keyword.validate!(opts, scale: nil, causal: false, sinks: nil)
    attention(q, k, v, mask, opts)
  end

  defp attention(q, k, v, mask, opts) do
    q = Nx.to_tensor(q)
    k = Nx.to_tensor(k)
    v = Nx.to_tensor(v)
    {b, h, lq, d, dv, lk} = check_shapes!(q, k, v)
    type = q.type |> Nx.Type.merge(k.type) |> Nx.Type.merge(v.type) |> Nx.Type.to_floating()
    scale = opts[:scale] || 1 / :math.sqrt(max(d, 1))

    unless is_number(scale) do
      raise ArgumentError,
            "scaled_dot_product_attention: :scale must be a number, got: #{inspect(scale)}"
    end

    {mask_kind, mask_args} = mask_arg!(mask, {b, h, lq, lk}, type)
    {has_sinks, sink_args} = sinks_arg!(opts[:sinks], h, type)

    struct = %__MODULE__{
      scale: scale * 1.0,
      causal: opts[:causal] == true,
      mask: mask_kind,
      sinks: has_sinks
    }

    args =
      [Nx.as_type(q, type), Nx.as_type(k, type), Nx.as_type(v, type)] ++ mask_args ++ sink_args

    out = Nx.template({b, h, lq, dv}, type)
    Nx.block(struct, args, out, fallback(length(args)))
  end

  # Nx.block/4 wants a function of the struct and each argument.
  defp fallback(3), do: fn s, q, k, v -> composed(s, [q, k, v]) end
  defp fallback(4), do: fn s, q, k, v, a -> composed(s, [q, k, v, a]) end
  defp fallback(5), do: fn s, q, k, v, a, b -> composed(s, [q, k, v, a, b]) end

  defp check_shapes!(q, k, v) do
    case {q.shape, k.shape, v.shape} do
      {{b, h, lq, d}, {b, hkv, lk, d}, {b, hkv, lk, dv}} when hkv > 0 and rem(h, hkv) == 0 ->
        {b, h, lq, d, dv, lk}

      _ ->
        raise ArgumentError,
              "scaled_dot_product_attention: expected q {batch, heads, q_len, head_dim}, " <>
                "k {batch, kv_heads, k_len, head_dim} and v {batch, kv_heads, k_len, v_dim} " <>
                "with heads a multiple of kv_heads, got q #{inspect(q.shape)}, " <>
                "k #{inspect(k.shape)} and v #{inspect(v.shape)}"
    end
  end

  defp mask_arg!(nil, _full, _type), do: {:none, []}

  defp mask_arg!(mask, full, type) do
    mask = Nx.to_tensor(mask)
    rank = Nx.rank(mask)
    dims = Tuple.to_list(full) |> Enum.drop(4 - min(rank, 4))

    fits =
      rank <= 4 and
        Enum.zip(Tuple.to_list(mask.shape), dims) |> Enum.all?(fn {m, w} -> m == w or m == 1 end)

    unless fits do
      raise ArgumentError,
            "scaled_dot_product_attention: the mask of shape #{inspect(mask.shape)} does not " <>
              "broadcast to {batch, heads, q_len, k_len} = #{inspect(full)}"
    end

    case mask.type do
      {:u, 8} -> {:boolean, [mask]}
      _ -> {:additive, [Nx.as_type(mask, type)]}
    end
  end

  defp sinks_arg!(nil, _h, _type), do: {false, []}

  defp sinks_arg!(sinks, h, type) do
    sinks = Nx.to_tensor(sinks)

    unless sinks.shape in [{h}, {1, h, 1}, {1, h, 1, 1}] do
      raise ArgumentError,
            "scaled_dot_product_attention: sinks must have shape {#{h}}, {1, #{h}, 1} or " <>
              "{1, #{h}, 1, 1} (one per query head), got #{inspect(sinks.shape)}"
    end

    {true, [sinks |> Nx.reshape({h}) |> Nx.as_type(type)]}
  end

  # ---- the engine kernel ----------------------------------------------------

  @impl Emily.Block
  def emily_block(%__MODULE__{} = s, %Nx.Tensor{type: type} = out, args)
      when type in @native_types do
    [q, k, v | rest] = Util.refs(args)
    {mask, rest} = if s.mask == :none, do: {nil, rest}, else: {hd(rest), tl(rest)}
    mask = if s.mask == :boolean, do: Util.pred(mask), else: mask
    sinks = if s.sinks, do: hd(rest), else: nil
    ref = Native.sdpa(q, k, v, s.scale, s.causal, mask, sinks)
    Util.wrap(out, Emily.check_finite("scaled_dot_product_attention", ref), args)
  end

  def emily_block(_struct, _out, _args), do: :fallback

  # ---- the composed version -------------------------------------------------

  @doc false
  # softmax(scale q kᵀ + mask) v from Nx operations, in f32 (f64 stays
  # f64): the fallback of the block, and the reference of the tests.
  def composed(%__MODULE__{} = s, [q, k, v | rest]) do
    {mask, rest} = if s.mask == :none, do: {nil, rest}, else: {hd(rest), tl(rest)}
    sinks = if s.sinks, do: hd(rest), else: nil
    out_type = q.type
    work = if out_type == {:f, 64}, do: {:f, 64}, else: {:f, 32}
    {b, h, lq, _d} = q.shape
    {_, hkv, lk, dv} = v.shape
    group = div(h, hkv)
    q = Nx.as_type(q, work)
    k = k |> Nx.as_type(work) |> repeat_heads(group)
    v = v |> Nx.as_type(work) |> repeat_heads(group)
    neg_inf = Nx.Constants.neg_infinity(work)

    scores = Nx.multiply(Nx.dot(q, [3], [0, 1], k, [3], [0, 1]), s.scale)

    scores =
      case s.mask do
        :none -> scores
        :additive -> Nx.add(scores, Nx.as_type(mask, work))
        :boolean -> Nx.select(Nx.broadcast(mask, scores.shape), scores, neg_inf)
      end

    scores =
      if s.causal do
        rows = Nx.iota({lq, lk}, axis: 0)
        cols = Nx.iota({lq, lk}, axis: 1)
        allowed = Nx.less_equal(cols, Nx.add(rows, lk - lq))
        Nx.select(Nx.broadcast(allowed, scores.shape), scores, neg_inf)
      else
        scores
      end

    sink4 = sinks && sinks |> Nx.as_type(work) |> Nx.reshape({1, h, 1, 1})
    row_max = Nx.reduce_max(scores, axes: [3], keep_axes: true)
    row_max = if sink4, do: Nx.max(row_max, sink4), else: row_max
    # Fully masked rows (max -inf) attend to nothing: weights 0.
    dead = Nx.equal(row_max, neg_inf)
    row_max = Nx.select(dead, 0.0, row_max)
    e = Nx.exp(Nx.subtract(scores, row_max))
    den = Nx.sum(e, axes: [3], keep_axes: true)
    den = if sink4, do: Nx.add(den, Nx.exp(Nx.subtract(sink4, row_max))), else: den
    den = Nx.select(Nx.equal(den, 0), 1.0, den)
    weights = Nx.divide(e, den)

    weights
    |> Nx.dot([3], [0, 1], v, [2], [0, 1])
    |> Nx.reshape({b, h, lq, dv})
    |> Nx.as_type(out_type)
  end

  # {b, hkv, l, d} -> {b, hkv * group, l, d}, each KV head repeated for the
  # `group` consecutive query heads that share it.
  defp repeat_heads(t, 1), do: t

  defp repeat_heads(t, group) do
    {b, hkv, l, d} = t.shape

    t
    |> Nx.new_axis(2)
    |> Nx.broadcast({b, hkv, group, l, d})
    |> Nx.reshape({b, hkv * group, l, d})
  end
end
