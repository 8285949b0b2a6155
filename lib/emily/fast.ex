defmodule Emily.Fast do
  @moduledoc """
  Fused transformer kernels — RMS norm, layer norm, softmax, rotary
  position embeddings and scaled dot-product attention — callable from
  `defn` and eagerly.

  Each function emits an `Nx.block/4` carrying an `Emily.Fast.Block.*`
  struct. Under `Emily.Backend` and `Emily.Compiler` the block runs one
  engine kernel (`include/emily_fast.h`: one pass over each row, float
  accumulation, threaded and vectorised on the CPU, one CUDA block per row
  on a GPU). On any other backend (`Nx.BinaryBackend`, EXLA, ...) the block
  runs its composed Nx fallback, which computes in f32 (f64 stays f64) and
  casts back. `Nx.Defn.grad/2` differentiates through the fallback, so
  gradients work everywhere.

  Tensors use the `{batch, heads, seq, head_dim}` layout for RoPE; the
  norms and softmax work on any rank. The result type is the floating type
  of the inputs (x merged with weight and bias). With the
  `:debug_detect_nan_inf` flag the native results are scanned for NaN and
  Inf (`Emily.check_finite/2`).
  """

  import Nx.Defn, only: [deftransform: 2]

  alias Emily.Fast.Block

  @doc """
  Fused scaled dot-product attention, `softmax(scale * q k^T) v`, with
  grouped-query heads, `:causal`, `:sinks` and `:mask` options: see
  `Emily.Fast.Attention.scaled_dot_product_attention/4`.
  """
  deftransform(scaled_dot_product_attention(q, k, v, opts \\ []),
    do: Emily.Fast.Attention.scaled_dot_product_attention(q, k, v, opts)
  )

  @doc """
  Fused scaled dot-product attention with an additive or boolean mask: see
  `Emily.Fast.Attention.scaled_dot_product_attention_with_mask/5`.
  """
  deftransform(scaled_dot_product_attention_with_mask(q, k, v, mask, opts \\ []),
    do: Emily.Fast.Attention.scaled_dot_product_attention_with_mask(q, k, v, mask, opts)
  )

  @doc """
  The decode path's fused matrix-vector product, `[silu(xn . gate^T) *]
  (xn . w^T) [+ residual]` with an optional RMS-norm prologue, `w` a row per
  output: see `Emily.Fast.Decode.linear/3`.
  """
  deftransform(linear(x, w, opts \\ []), do: Emily.Fast.Decode.linear(x, w, opts))

  @doc """
  The decode step's head split with the per-head RMS norm and RoPE in one
  kernel: see `Emily.Fast.Decode.heads/3`.
  """
  deftransform(heads(x, offset, opts), do: Emily.Fast.Decode.heads(x, offset, opts))

  @doc """
  RMS normalisation over the last axis:
  `x * rsqrt(mean(x ** 2) + eps) * weight`.

  `weight` has shape `{D}` (the last dimension of `x`) or is `nil`.

  ## Options

    * `:eps` - added to the mean square. Defaults to `1.0e-6`.

  ## Examples

      iex> x = Nx.tensor([[1.0, 2.0, 3.0, 4.0]])
      iex> Emily.Fast.rms_norm(x, Nx.tensor([1.0, 1.0, 2.0, 0.5]), eps: 0.0)
      ...> |> Nx.multiply(Nx.sqrt(7.5)) |> Nx.round()
      #Nx.Tensor<
        f32[1][4]
        [
          [1.0, 2.0, 6.0, 2.0]
        ]
      >
  """
  deftransform rms_norm(x, weight, opts \\ []) do
    opts = Keyword.validate!(opts, eps: 1.0e-6)
    eps = number!(opts[:eps], :eps, "rms_norm")
    {x, vectorized} = devectorize(x)
    weight = vector!(weight, x, "rms_norm", "weight")
    out = template(x, [weight])
    struct = %Block.RMSNorm{eps: eps, weight?: weight != nil}

    fallback =
      if weight,
        do: fn %Block.RMSNorm{}, x, w -> rms_norm_fallback(x, w, eps, out.type) end,
        else: fn %Block.RMSNorm{}, x -> rms_norm_fallback(x, nil, eps, out.type) end

    struct
    |> Nx.block(compact([x, weight]), out, fallback)
    |> revectorize(vectorized)
  end

  @doc """
  Layer normalisation over the last axis:
  `(x - mean) * rsqrt(var + eps) * weight + bias` with the biased variance.

  `weight` and `bias` have shape `{D}` or are `nil`.

  ## Options

    * `:eps` - added to the variance. Defaults to `1.0e-5`.
  """
  deftransform layer_norm(x, weight, bias, opts \\ []) do
    opts = Keyword.validate!(opts, eps: 1.0e-5)
    eps = number!(opts[:eps], :eps, "layer_norm")
    {x, vectorized} = devectorize(x)
    weight = vector!(weight, x, "layer_norm", "weight")
    bias = vector!(bias, x, "layer_norm", "bias")
    out = template(x, [weight, bias])
    struct = %Block.LayerNorm{eps: eps, weight?: weight != nil, bias?: bias != nil}

    type = out.type

    fallback =
      case {weight, bias} do
        {nil, nil} -> fn %Block.LayerNorm{}, x -> layer_norm_fallback(x, nil, nil, eps, type) end
        {_, nil} -> fn %Block.LayerNorm{}, x, w -> layer_norm_fallback(x, w, nil, eps, type) end
        {nil, _} -> fn %Block.LayerNorm{}, x, b -> layer_norm_fallback(x, nil, b, eps, type) end
        _ -> fn %Block.LayerNorm{}, x, w, b -> layer_norm_fallback(x, w, b, eps, type) end
      end

    struct
    |> Nx.block(compact([x, weight, bias]), out, fallback)
    |> revectorize(vectorized)
  end

  @doc """
  Softmax along an axis, numerically stable: `exp(x - max) / sum(exp(x - max))`.

  The native kernel reads each row once (a running max and a rescaled
  running sum), then writes it.

  ## Options

    * `:axis` - the axis (an index or a name). Defaults to `-1`.
  """
  deftransform softmax(x, opts \\ []) do
    opts = Keyword.validate!(opts, axis: -1)
    x = Nx.to_tensor(x)
    axis = Nx.axis_index(x, opts[:axis])
    {x, vectorized} = devectorize(x)
    axis = axis + length(vectorized)
    out = template(x, [])

    Nx.block(%Block.Softmax{axis: axis}, [x], out, fn %Block.Softmax{axis: axis}, x ->
      softmax_fallback(x, axis, out.type)
    end)
    |> revectorize(vectorized)
  end

  @doc """
  Rotary position embedding of `x` (`{batch, heads, seq, head_dim}`, or any
  rank >= 2 with the sequence on the second-to-last axis) at positions
  `offset + 0 .. seq - 1`.

  `offset` is an integer or a scalar integer tensor (a tensor lets a
  compiled decode step run again with a new offset).

  ## Options

    * `:dims` - required: rotate the first `dims` features (even, at most
      `head_dim`); the rest pass through.
    * `:traditional` - `true` rotates interleaved pairs `(x0, x1), (x2, x3)`;
      `false` (default) rotates `(x_i, x_{i + dims/2})`, the Hugging Face /
      GPT-NeoX form.
    * `:base` - the angle of pair `i` at position `p` is
      `scale * p * base ** (-2i / dims)`. Defaults to `10_000.0`.
    * `:scale` - multiplies the positions. Defaults to `1.0`.
  """
  deftransform rope(x, offset, opts) do
    opts = Keyword.validate!(opts, [:dims, traditional: false, base: 10_000.0, scale: 1.0])
    {x, vectorized} = devectorize(x)
    dims = dims!(opts[:dims], x)
    base = number!(opts[:base], :base, "rope")
    scale = number!(opts[:scale], :scale, "rope")
    traditional = bool!(opts[:traditional])
    offset = offset!(offset, x)
    out = template(x, [])
    struct = %Block.RoPE{dims: dims, traditional: traditional, base: base, scale: scale}

    Nx.block(struct, [x, offset], out, fn %Block.RoPE{}, x, offset ->
      rope_fallback(x, offset, {:base, base}, dims, traditional, scale, out.type)
    end)
    |> revectorize(vectorized)
  end

  @doc """
  `rope/3` with precomputed frequencies instead of `:base`, in MLX's
  convention: `freqs` is a 1-D tensor of `dims / 2` periods and pair `i`
  turns by `scale * p / freqs[i]` at position `p`. Llama 3, LongRoPE,
  linear and dynamic RoPE scaling are expressed this way.

  ## Options

    * `:dims` (required), `:traditional` (`false`), `:scale` (`1.0`), as in `rope/3`.
  """
  deftransform rope_with_freqs(x, offset, freqs, opts) do
    opts = Keyword.validate!(opts, [:dims, traditional: false, scale: 1.0])
    {x, vectorized} = devectorize(x)
    dims = dims!(opts[:dims], x)
    scale = number!(opts[:scale], :scale, "rope_with_freqs")
    traditional = bool!(opts[:traditional])
    offset = offset!(offset, x)
    freqs = Nx.to_tensor(freqs)

    if freqs.shape != {div(dims, 2)} do
      raise ArgumentError,
            "Emily.Fast.rope_with_freqs: freqs must have shape {#{div(dims, 2)}} (dims / 2), " <>
              "got #{inspect(freqs.shape)}"
    end

    freqs = Nx.as_type(freqs, :f32)
    out = template(x, [])
    struct = %Block.RoPEWithFreqs{dims: dims, traditional: traditional, scale: scale}

    Nx.block(struct, [x, offset, freqs], out, fn %Block.RoPEWithFreqs{}, x, offset, freqs ->
      rope_fallback(x, offset, {:freqs, freqs}, dims, traditional, scale, out.type)
    end)
    |> revectorize(vectorized)
  end

  # ---------------------------------------------------------------------------
  # Composed fallbacks (run by Nx on other backends, and differentiated by
  # Nx.Defn.grad everywhere): f32 inside (f64 stays f64), cast back at the end.
  # ---------------------------------------------------------------------------

  defp compute_type({:f, 64}), do: {:f, 64}
  defp compute_type(_), do: {:f, 32}

  defp up(nil, _type), do: nil
  defp up(t, type), do: Nx.as_type(t, compute_type(type))

  defp rms_norm_fallback(x, w, eps, type) do
    x = up(x, type)
    r = Nx.rsqrt(Nx.add(Nx.mean(Nx.multiply(x, x), axes: [-1], keep_axes: true), eps))
    y = Nx.multiply(x, r)
    y = if w, do: Nx.multiply(y, up(w, type)), else: y
    Nx.as_type(y, type)
  end

  defp layer_norm_fallback(x, w, b, eps, type) do
    x = up(x, type)
    xc = Nx.subtract(x, Nx.mean(x, axes: [-1], keep_axes: true))
    var = Nx.mean(Nx.multiply(xc, xc), axes: [-1], keep_axes: true)
    y = Nx.multiply(xc, Nx.rsqrt(Nx.add(var, eps)))
    y = if w, do: Nx.multiply(y, up(w, type)), else: y
    y = if b, do: Nx.add(y, up(b, type)), else: y
    Nx.as_type(y, type)
  end

  defp softmax_fallback(x, axis, type) do
    x = up(x, type)
    e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [axis], keep_axes: true)))
    Nx.as_type(Nx.divide(e, Nx.sum(e, axes: [axis], keep_axes: true)), type)
  end

  # The angle of pair i at position p: scale * p * base^(-2i/dims), or
  # scale * p / freqs[i] (MLX's periods).
  defp rope_fallback(x, offset, freqs, dims, traditional, scale, type) do
    ct = compute_type(type)
    rank = Nx.rank(x)
    seq = elem(x.shape, rank - 2)
    d = elem(x.shape, rank - 1)
    half = div(dims, 2)

    inv =
      case freqs do
        {:base, base} -> Nx.pow(base, Nx.divide(Nx.multiply(Nx.iota({half}, type: ct), -2), dims))
        {:freqs, freqs} -> Nx.divide(1.0, Nx.as_type(freqs, ct))
      end

    pos = Nx.multiply(Nx.as_type(Nx.add(Nx.iota({seq}, type: :s64), offset), ct), scale)
    theta = Nx.outer(pos, Nx.as_type(inv, ct))
    {c, s} = {Nx.cos(theta), Nx.sin(theta)}
    x = up(x, type)
    rot = Nx.slice_along_axis(x, 0, dims, axis: -1)

    rotated =
      if traditional do
        pairs = Nx.reshape(rot, put_elem(x.shape, rank - 1, half) |> Tuple.insert_at(rank, 2))
        a = Nx.squeeze(Nx.slice_along_axis(pairs, 0, 1, axis: -1), axes: [-1])
        b = Nx.squeeze(Nx.slice_along_axis(pairs, 1, 1, axis: -1), axes: [-1])
        ya = Nx.subtract(Nx.multiply(a, c), Nx.multiply(b, s))
        yb = Nx.add(Nx.multiply(a, s), Nx.multiply(b, c))
        Nx.stack([ya, yb], axis: -1) |> Nx.reshape(put_elem(x.shape, rank - 1, dims))
      else
        a = Nx.slice_along_axis(rot, 0, half, axis: -1)
        b = Nx.slice_along_axis(rot, half, half, axis: -1)
        ya = Nx.subtract(Nx.multiply(a, c), Nx.multiply(b, s))
        yb = Nx.add(Nx.multiply(a, s), Nx.multiply(b, c))
        Nx.concatenate([ya, yb], axis: -1)
      end

    y =
      if dims < d,
        do: Nx.concatenate([rotated, Nx.slice_along_axis(x, dims, d - dims, axis: -1)], axis: -1),
        else: rotated

    Nx.as_type(y, type)
  end

  # ---------------------------------------------------------------------------
  # Validation and templates
  # ---------------------------------------------------------------------------

  defp devectorize(x) do
    %Nx.Tensor{vectorized_axes: vectorized} = x = Nx.to_tensor(x)
    {Nx.devectorize(x, keep_names: false), vectorized}
  end

  defp revectorize(t, []), do: t
  defp revectorize(t, vectorized), do: Nx.vectorize(t, vectorized)

  defp compact(list), do: Enum.reject(list, &is_nil/1)

  # The output template: x's shape and names, the floating type of every input.
  defp template(x, others) do
    type =
      others
      |> compact()
      |> Enum.reduce(x.type, fn t, acc -> Nx.Type.merge(acc, t.type) end)
      |> Nx.Type.to_floating()

    if Nx.rank(x) < 1 do
      raise ArgumentError,
            "Emily.Fast: expected a tensor of rank >= 1, got shape #{inspect(x.shape)}"
    end

    %{x | type: type}
  end

  defp vector!(nil, _x, _op, _what), do: nil

  defp vector!(v, x, op, what) do
    v = Nx.to_tensor(v)
    d = elem(x.shape, tuple_size(x.shape) - 1)

    if tuple_size(x.shape) < 1 or v.shape != {d} do
      raise ArgumentError,
            "Emily.Fast.#{op}: #{what} must have shape {#{d}} (the last dimension of x, " <>
              "shape #{inspect(x.shape)}), got #{inspect(v.shape)}"
    end

    v
  end

  defp number!(v, _key, _op) when is_number(v), do: v * 1.0

  defp number!(v, key, op),
    do:
      raise(
        ArgumentError,
        "Emily.Fast.#{op}: #{inspect(key)} must be a number, got #{inspect(v)}"
      )

  defp bool!(v) when is_boolean(v), do: v

  defp bool!(v),
    do: raise(ArgumentError, "Emily.Fast: :traditional must be a boolean, got #{inspect(v)}")

  defp dims!(dims, x) do
    rank = Nx.rank(x)

    if rank < 2 do
      raise ArgumentError,
            "Emily.Fast.rope: x must have rank >= 2 ({..., seq, head_dim}), got shape #{inspect(x.shape)}"
    end

    d = elem(x.shape, rank - 1)

    unless is_integer(dims) and dims >= 2 and rem(dims, 2) == 0 and dims <= d do
      raise ArgumentError,
            "Emily.Fast.rope: :dims must be an even integer in 2..#{d} (head_dim), got #{inspect(dims)}"
    end

    dims
  end

  # Inside defn an integer offset becomes a constant of the expression (a
  # block's arguments are all tensors of one kind).
  defp offset!(offset, %Nx.Tensor{data: %Nx.Defn.Expr{}}) when is_integer(offset),
    do: Nx.Defn.Expr.tensor(Nx.tensor(offset, type: :s32, backend: Nx.BinaryBackend))

  defp offset!(offset, _x) when is_integer(offset),
    do: Nx.tensor(offset, type: :s32, backend: Nx.BinaryBackend)

  defp offset!(%Nx.Tensor{shape: {}, type: {kind, _}} = offset, _x) when kind in [:s, :u] do
    if offset.type == {:s, 64}, do: offset, else: Nx.as_type(offset, :s32)
  end

  defp offset!(offset, _x) do
    raise ArgumentError,
          "Emily.Fast.rope: offset must be an integer or a scalar integer tensor, got #{inspect(offset)}"
  end
end
