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

    # Nx.block calls the fallback with the struct and each input.
    fallback =
      case length(inputs) do
        2 -> fn s, x, w -> linear_fallback(s, x, w, [], type) end
        3 -> fn s, x, w, a -> linear_fallback(s, x, w, [a], type) end
        4 -> fn s, x, w, a, b -> linear_fallback(s, x, w, [a, b], type) end
        5 -> fn s, x, w, a, b, c -> linear_fallback(s, x, w, [a, b, c], type) end
      end

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

  # Nx.block passes the inputs positionally; the optional ones arrive in
  # the order norm_weight, gate, residual (those present).
  defp linear_fallback(s, x, w, rest, type) do
    {nw, rest} = take(s.norm_weight?, rest)
    {gate, rest} = take(s.gate?, rest)
    {residual, []} = take(s.residual?, rest)
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

  defp take(false, rest), do: {nil, rest}
  defp take(true, [t | rest]), do: {t, rest}

  defp compute_type({:f, 64}), do: {:f, 64}
  defp compute_type(_), do: {:f, 32}
end
