defmodule Emily.Fast.Block.Linear do
  @moduledoc false
  @behaviour Emily.Block
  defstruct norm: false, eps: 1.0e-6, norm_weight?: false, gate?: false, residual?: false

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{} = s, out, [x, w | rest]) do
    nw = if s.norm_weight?, do: Enum.at(rest, 0)
    gate = if s.gate?, do: Enum.at(rest, if(s.norm_weight?, do: 1, else: 0))
    residual = if s.residual?, do: List.last(rest)

    case Block.refs(out, [x, w, nw, gate, residual]) do
      :fallback ->
        :fallback

      [xr, wr, nwr, gr, rr] ->
        ref = Emily.Native.fast_linear(xr, wr, s.norm, nwr, s.eps, gr, rr)
        Block.wrap(out, ref, [x], :fast_linear)
    end
  end
end

defmodule Emily.Fast.Block.Heads do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [
    :head_dim,
    :first,
    :count,
    :dims,
    norm: false,
    eps: 1.0e-6,
    norm_weight?: false,
    rope?: false,
    traditional: false,
    base: 10_000.0,
    scale: 1.0,
    cache?: false
  ]

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{} = s, out, [x | rest]) do
    [nw, offset, cache, cache_offset] =
      Block.optional(rest, [s.norm_weight?, s.rope?, s.cache?, s.cache?])

    # The kernel writes the heads in their own type into the cache: a cache
    # of another type takes the composed route (the heads rounded to their
    # type, then put into the cache, as the fallback computes it).
    heads_type = Nx.Type.to_floating(if nw, do: Nx.Type.merge(x.type, nw.type), else: x.type)

    refs =
      if cache && cache.type != heads_type,
        do: :fallback,
        else: Block.refs(out, [x, nw, cache])

    case refs do
      :fallback ->
        :fallback

      [xr, nwr, cr] ->
        off = if offset, do: Block.offset_ref(offset, xr)
        coff = if cache_offset, do: Block.offset_ref(cache_offset, xr)

        ref =
          Emily.Native.fast_heads(
            xr,
            s.head_dim,
            s.first,
            s.count,
            s.norm,
            nwr,
            s.eps,
            off,
            s.dims,
            s.traditional,
            s.base,
            s.scale,
            cr,
            coff
          )

        Block.wrap(out, ref, [x], :fast_heads)
    end
  end
end

defmodule Emily.Fast.Decode do
  @moduledoc """
  The decode path's fused kernels (`include/emily_fast.h`, issue 16):
  matrix-vector products with what surrounds them in a decoder layer,
  callable from `defn` and eagerly (`Emily.Fast.linear/3` delegates here).

  Like the rest of `Emily.Fast`, each function emits an `Nx.block/4`: under
  `Emily.Backend` and `Emily.Compiler` it runs one engine kernel (on a GPU
  the weight rows are streamed once with 16-byte loads), elsewhere the
  composed Nx fallback, computed in f32 (f64 stays f64) and cast back.
  The native kernels have no gradient rule: differentiate through the
  fallback (another backend) or the composed ops.
  """

  import Nx.Defn, only: [deftransform: 2]

  alias Emily.Fast.Block

  @doc """
  `[silu(xn . gate^T) *] (xn . w^T) [+ residual]` with `xn` either `x` or,
  with a norm, `x * rsqrt(mean(x ** 2) + eps) * norm_weight` over the last
  axis (kept in the compute type).

  `x` is `{..., k}`; `w` (and `:gate`) `{n, k}`, a row per output (the
  checkpoint layout); the result `{..., n}`.

  ## Options

    * `:norm` - apply the RMS-norm prologue. Defaults to `false` (`true`
      when `:norm_weight` is given).
    * `:norm_weight` - `{k}`, or `nil`.
    * `:eps` - the norm's epsilon. Defaults to `1.0e-6`.
    * `:gate` - `{n, k}`: the SwiGLU product `silu(xn . gate^T) * (xn . w^T)`.
    * `:residual` - `{..., n}`, added to the result.

  ## Examples

      iex> x = Nx.tensor([[1.0, 2.0]])
      iex> w = Nx.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
      iex> Emily.Fast.Decode.linear(x, w, residual: Nx.tensor([[10.0, 20.0, 30.0]]))
      #Nx.Tensor<
        f32[1][3]
        [
          [11.0, 22.0, 33.0]
        ]
      >
  """
  deftransform linear(x, w, opts \\ []) do
    opts =
      Keyword.validate!(opts,
        norm: false,
        norm_weight: nil,
        eps: 1.0e-6,
        gate: nil,
        residual: nil
      )

    x = Nx.to_tensor(x)
    w = Nx.to_tensor(w)
    nw = opts[:norm_weight] && Nx.to_tensor(opts[:norm_weight])
    gate = opts[:gate] && Nx.to_tensor(opts[:gate])
    residual = opts[:residual] && Nx.to_tensor(opts[:residual])
    norm = opts[:norm] == true or nw != nil
    eps = opts[:eps]

    unless is_number(eps), do: raise(ArgumentError, "Emily.Fast.linear: :eps must be a number")

    out_shape = check_shapes!(x, w, nw, gate, residual)

    type =
      [w, nw, gate, residual]
      |> Enum.reject(&is_nil/1)
      |> Enum.reduce(x.type, &Nx.Type.merge(&2, &1.type))
      |> Nx.Type.to_floating()

    out = Nx.template(out_shape, type)

    struct = %Block.Linear{
      norm: norm,
      eps: eps * 1.0,
      norm_weight?: nw != nil,
      gate?: gate != nil,
      residual?: residual != nil
    }

    inputs = Enum.reject([x, w, nw, gate, residual], &is_nil/1)

    fallback =
      spread(length(inputs), fn s, [x, w | rest] -> linear_fallback(s, x, w, rest, type) end)

    Nx.block(struct, inputs, out, fallback)
  end

  defp check_shapes!(x, w, nw, gate, residual) do
    rank = Nx.rank(x)

    if rank < 1 or Nx.rank(w) != 2 or elem(w.shape, 1) != elem(x.shape, rank - 1) do
      raise ArgumentError,
            "Emily.Fast.linear: x {..., k} and w {n, k} must share k, " <>
              "got #{inspect(x.shape)} and #{inspect(w.shape)}"
    end

    {n, k} = w.shape
    out_shape = put_elem(x.shape, rank - 1, n)

    for {t, want, what} <- [
          {nw, {k}, "norm_weight"},
          {gate, w.shape, "gate"},
          {residual, out_shape, "residual"}
        ],
        t != nil and t.shape != want do
      raise ArgumentError,
            "Emily.Fast.linear: #{what} must have shape #{inspect(want)}, got #{inspect(t.shape)}"
    end

    out_shape
  end

  # Nx.block calls its fallback with the struct and each input: a function
  # of that arity handing the inputs on as a list.
  defp spread(1, f), do: fn s, a -> f.(s, [a]) end
  defp spread(2, f), do: fn s, a, b -> f.(s, [a, b]) end
  defp spread(3, f), do: fn s, a, b, c -> f.(s, [a, b, c]) end
  defp spread(4, f), do: fn s, a, b, c, d -> f.(s, [a, b, c, d]) end
  defp spread(5, f), do: fn s, a, b, c, d, e -> f.(s, [a, b, c, d, e]) end

  # The optional inputs arrive in the order norm_weight, gate, residual
  # (those present).
  defp linear_fallback(s, x, w, rest, type) do
    [nw, gate, residual] = Block.optional(rest, [s.norm_weight?, s.gate?, s.residual?])
    c = compute_type(type)
    x = Nx.as_type(x, c)

    xn =
      if s.norm do
        r = Nx.rsqrt(Nx.add(Nx.mean(Nx.multiply(x, x), axes: [-1], keep_axes: true), s.eps))
        xn = Nx.multiply(x, r)
        if nw, do: Nx.multiply(xn, Nx.as_type(nw, c)), else: xn
      else
        x
      end

    last = Nx.rank(xn) - 1
    h = Nx.dot(xn, [last], Nx.as_type(w, c), [1])

    h =
      if gate do
        g = Nx.dot(xn, [last], Nx.as_type(gate, c), [1])
        Nx.multiply(Nx.multiply(g, Nx.sigmoid(g)), h)
      else
        h
      end

    h = if residual, do: Nx.add(h, Nx.as_type(residual, c)), else: h
    Nx.as_type(h, type)
  end

  @doc """
  The decode step's head split with the per-head RMS norm, RoPE and the
  KV-cache write in one kernel: heads `first .. first + count - 1` of `x`
  `{b, s, n}` (each of `:head_dim` features) as `{b, count, s, head_dim}`,
  normed and rotated at positions `offset + 0 .. s - 1` (`offset` an
  integer, a scalar integer tensor, or `nil` for no rotation).

  With `:cache` (`{b, count, l, head_dim}`, `l >= s`) the result is the
  cache with the `s` new rows of every head written at `:cache_offset`:
  `Nx.put_slice(cache, [0, 0, cache_offset, 0], heads)`, the offset
  clamped into `[0, l - s]` as `Nx.put_slice/3` clamps. Under
  `Emily.Backend` the kernel writes the rows straight into the cache, in
  place when nothing else holds the cache's buffer (no copy of the cache
  per token), so a decode step gives k and v to its cache in one call.

  ## Options

    * `:head_dim`, `:count` - required; `:first` - defaults to `0`.
    * `:norm`, `:norm_weight` (`{head_dim}`), `:eps` - as in `linear/3`.
    * `:dims` (defaults to `:head_dim`), `:traditional` (`false`), `:base`
      (`10_000.0`), `:scale` (`1.0`) - as in `Emily.Fast.rope/3`.
    * `:cache` - the KV cache to write into, or `nil` (the heads alone).
    * `:cache_offset` - required with `:cache`: the cache row of `x`'s
      sequence index 0, an integer or a scalar integer tensor (separate
      from `offset`: v has no rotation; in a decode step both are the
      position).
  """
  deftransform heads(x, offset, opts) do
    opts =
      Keyword.validate!(opts, [
        :head_dim,
        :count,
        first: 0,
        norm: false,
        norm_weight: nil,
        eps: 1.0e-6,
        dims: nil,
        traditional: false,
        base: 10_000.0,
        scale: 1.0,
        cache: nil,
        cache_offset: nil
      ])

    x = Nx.to_tensor(x)
    d = opts[:head_dim]
    count = opts[:count]
    first = opts[:first]
    nw = opts[:norm_weight] && Nx.to_tensor(opts[:norm_weight])

    unless is_integer(d) and d > 0 and is_integer(count) and count > 0 and is_integer(first) and
             first >= 0 and Nx.rank(x) == 3 and (first + count) * d <= elem(x.shape, 2) do
      raise ArgumentError,
            "Emily.Fast.heads: x must be {b, s, n} holding heads #{inspect(first)}.." <>
              "#{inspect(first)} + #{inspect(count)} - 1 of :head_dim #{inspect(d)} features, " <>
              "got #{inspect(x.shape)}"
    end

    if nw && nw.shape != {d} do
      raise ArgumentError,
            "Emily.Fast.heads: norm_weight must have shape {#{d}}, got #{inspect(nw.shape)}"
    end

    offset = offset && heads_offset!(offset, x, "offset")
    {b, sq, _} = x.shape
    {cache, cache_offset} = heads_cache!(opts[:cache], opts[:cache_offset], x, {b, count, sq, d})

    type =
      if(nw, do: Nx.Type.merge(x.type, nw.type), else: x.type) |> Nx.Type.to_floating()

    out =
      if cache,
        do: Nx.template(cache.shape, Nx.Type.merge(type, cache.type)),
        else: Nx.template({b, count, sq, d}, type)

    struct = %Block.Heads{
      head_dim: d,
      first: first,
      count: count,
      dims: opts[:dims] || d,
      norm: opts[:norm] == true or nw != nil,
      eps: opts[:eps] * 1.0,
      norm_weight?: nw != nil,
      rope?: offset != nil,
      traditional: opts[:traditional] == true,
      base: opts[:base] * 1.0,
      scale: opts[:scale] * 1.0,
      cache?: cache != nil
    }

    inputs = Enum.reject([x, nw, offset, cache, cache_offset], &is_nil/1)

    fallback =
      spread(length(inputs), fn s, [x | rest] -> heads_fallback(s, x, rest, type, out.type) end)

    Nx.block(struct, inputs, out, fallback)
  end

  # The cache ({b, count, l, head_dim}, l >= s) and its offset, both or
  # neither.
  defp heads_cache!(nil, nil, _x, _heads_shape), do: {nil, nil}

  defp heads_cache!(nil, _cache_offset, _x, _heads_shape),
    do: raise(ArgumentError, "Emily.Fast.heads: :cache_offset given without :cache")

  defp heads_cache!(_cache, nil, _x, _heads_shape),
    do: raise(ArgumentError, "Emily.Fast.heads: :cache needs :cache_offset")

  defp heads_cache!(cache, cache_offset, x, {b, count, sq, d}) do
    cache = Nx.to_tensor(cache)

    case cache.shape do
      {^b, ^count, l, ^d} when l >= sq ->
        {cache, heads_offset!(cache_offset, x, "cache_offset")}

      shape ->
        raise ArgumentError,
              "Emily.Fast.heads: cache must be {#{b}, #{count}, l, #{d}} with l >= #{sq}, " <>
                "got #{inspect(shape)}"
    end
  end

  defp heads_offset!(offset, %Nx.Tensor{data: %Nx.Defn.Expr{}}, _what) when is_integer(offset),
    do: Nx.Defn.Expr.tensor(Nx.tensor(offset, type: :s32, backend: Nx.BinaryBackend))

  defp heads_offset!(offset, _x, _what) when is_integer(offset),
    do: Nx.tensor(offset, type: :s32, backend: Nx.BinaryBackend)

  defp heads_offset!(%Nx.Tensor{shape: {}, type: {kind, _}} = offset, _x, _what)
       when kind in [:s, :u] do
    if offset.type == {:s, 64}, do: offset, else: Nx.as_type(offset, :s32)
  end

  defp heads_offset!(offset, _x, what) do
    raise ArgumentError,
          "Emily.Fast.heads: #{what} must be nil, an integer or a scalar integer tensor, " <>
            "got #{inspect(offset)}"
  end

  # The optional inputs arrive in the order norm_weight, offset, cache,
  # cache_offset (those present).
  defp heads_fallback(s, x, rest, type, out_type) do
    [nw, offset, cache, cache_offset] =
      Block.optional(rest, [s.norm_weight?, s.rope?, s.cache?, s.cache?])

    c = compute_type(type)
    {b, sq, _} = x.shape

    h =
      x
      |> Nx.slice_along_axis(s.first * s.head_dim, s.count * s.head_dim, axis: 2)
      |> Nx.reshape({b, sq, s.count, s.head_dim})
      |> Nx.as_type(c)

    h =
      if s.norm do
        r = Nx.rsqrt(Nx.add(Nx.mean(Nx.multiply(h, h), axes: [-1], keep_axes: true), s.eps))
        hn = Nx.multiply(h, r)
        if nw, do: Nx.multiply(hn, Nx.as_type(nw, c)), else: hn
      else
        h
      end

    h = Nx.transpose(h, axes: [0, 2, 1, 3])

    h =
      if offset do
        Emily.Fast.rope(h, offset,
          dims: s.dims,
          traditional: s.traditional,
          base: s.base,
          scale: s.scale
        )
      else
        h
      end

    h = Nx.as_type(h, type)

    if cache,
      do: cache |> Nx.put_slice([0, 0, cache_offset, 0], h) |> Nx.as_type(out_type),
      else: h
  end

  defp compute_type({:f, 64}), do: {:f, 64}
  defp compute_type(_), do: {:f, 32}
end
