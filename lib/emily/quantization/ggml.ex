defmodule Emily.Quantization.GGML do
  @moduledoc """
  Matrix products on ggml's block formats (the weights of GGUF files), read
  as they are: `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q8_0`, `q4_k`, `q5_k`,
  `q6_k`.

  A ggml matrix of `n` rows and `k` columns is a u8 tensor
  `{n, div(k, block_elems) * block_bytes}` of raw blocks (each row's blocks
  in order, as a GGUF file stores them) plus its type. `weight/3` wraps it
  into an `Emily.QuantizedWeight` (`mode` names the format, `group_size` is
  the block's weight count, `bits` the quant width; `scales` and `biases`
  are unused zeros: the scales live inside the blocks).

  `quantized_matmul/2` computes `x @ w^T` and `dequantize/2` the float
  matrix. Both are `Nx.block/4`s: on `Emily.Backend` and under
  `Emily.Compiler` they run the engine's kernels (which never expand the
  whole matrix: see `include/emily_ggml.h`); on any other backend they run
  a pure-Nx version (bit operations on the u8 tensor) that gives the same
  dequantized values bit for bit.

      raw = Nx.from_binary(bytes, :u8) |> Nx.reshape({n, div(k, 32) * 18})
      w = Emily.Quantization.GGML.weight(raw, :q4_0, {n, k})
      y = Emily.Quantization.GGML.quantized_matmul(x, w)
  """

  import Nx, only: [bitwise_and: 2, bitwise_or: 2, right_shift: 2, left_shift: 2]

  alias Emily.Backend.Util
  alias Emily.Native

  defmodule Dequantize do
    @moduledoc false
    @behaviour Emily.Block
    defstruct [:type, :k]

    @impl true
    def emily_block(%__MODULE__{type: num, k: k}, %Nx.Tensor{type: type} = out, [raw])
        when type in [{:f, 32}, {:f, 16}, {:bf, 16}, {:f, 64}] do
      ref = Native.ggml_dequantize(Util.ref(raw), num, k, type)
      Util.wrap(out, Emily.check_finite("ggml_dequantize", ref), [raw])
    end

    def emily_block(_struct, _out, _args), do: :fallback

    @doc false
    def composed(%__MODULE__{type: num}, raw, type) do
      Emily.Quantization.GGML.composed_dequantize(raw, num) |> Nx.as_type(type)
    end
  end

  defmodule Matmul do
    @moduledoc false
    @behaviour Emily.Block
    defstruct [:type, :k]

    @impl true
    def emily_block(%__MODULE__{type: num, k: k}, %Nx.Tensor{type: type} = out, [x, raw])
        when type in [{:f, 32}, {:f, 16}, {:bf, 16}] do
      if Nx.type(x) == type do
        [xr, rr] = Util.refs([x, raw])
        ref = Native.ggml_matmul(xr, rr, num, k)
        Util.wrap(out, Emily.check_finite("ggml_matmul", ref), [x, raw])
      else
        :fallback
      end
    end

    def emily_block(_struct, _out, _args), do: :fallback

    @doc false
    # x (as f32, f64 for f64 x) . dequantized w^T, then x's type.
    def composed(%__MODULE__{type: num}, x, raw, out_type) do
      work = if out_type == {:f, 64}, do: {:f, 64}, else: {:f, 32}
      w = Emily.Quantization.GGML.composed_dequantize(raw, num) |> Nx.as_type(work)
      x = Nx.as_type(x, work)
      Nx.dot(x, [Nx.rank(x) - 1], w, [1]) |> Nx.as_type(out_type)
    end
  end

  # name => {ggml type number, weights per block, bytes per block, bits}
  @types %{
    q4_0: {2, 32, 18, 4},
    q4_1: {3, 32, 20, 4},
    q5_0: {6, 32, 22, 5},
    q5_1: {7, 32, 24, 5},
    q8_0: {8, 32, 34, 8},
    q4_k: {12, 256, 144, 4},
    q5_k: {13, 256, 176, 5},
    q6_k: {14, 256, 210, 6}
  }
  @names Map.keys(@types) |> Enum.sort_by(fn name -> elem(@types[name], 0) end)

  @doc "The formats' mode strings, as `Emily.QuantizedWeight`'s `mode`."
  def modes, do: Enum.map(@names, &Atom.to_string/1)

  @doc """
  Wraps `raw`, a u8 tensor of ggml blocks of `type` (`:q4_0` ... or ggml's
  type number), encoding an `{n, k}` matrix, into an `Emily.QuantizedWeight`.
  Raises when the type is not a block format or the shape does not match.
  """
  def weight(%Nx.Tensor{} = raw, type, {n, k}) when is_integer(n) and is_integer(k) do
    name = type_name!(type)
    {_num, be, bb, bits} = @types[name]

    if rem(k, be) != 0 or k < 0 do
      raise ArgumentError,
            "#{name}: k = #{k} must be a non-negative multiple of the block of #{be} weights"
    end

    expected = {n, div(k, be) * bb}

    if Nx.type(raw) != {:u, 8} or Nx.shape(raw) != expected do
      raise ArgumentError,
            "#{name} weights {#{n}, #{k}} need raw blocks u8#{inspect(expected)}, " <>
              "got #{Util.type_name(Nx.type(raw))}#{inspect(Nx.shape(raw))}"
    end

    %Emily.QuantizedWeight{
      value: raw,
      scales: Nx.tensor(0.0),
      biases: Nx.tensor(0.0),
      group_size: be,
      bits: bits,
      transpose: true,
      mode: Atom.to_string(name)
    }
  end

  @doc """
  `x @ w^T` for `x` `{..., m, k}` and the ggml weight `w` (`{n, k}`):
  `{..., m, n}` in x's type (f32 for integer `x`), accumulated in f32.
  """
  def quantized_matmul(x, %Emily.QuantizedWeight{value: raw, mode: mode}) do
    x = Nx.to_tensor(x)
    {num, k} = info!(mode, raw)
    {n, _} = Nx.shape(raw)
    out_type = if Nx.Type.float?(Nx.type(x)), do: Nx.type(x), else: {:f, 32}

    if elem(Nx.shape(x), tuple_size(Nx.shape(x)) - 1) != k do
      raise ArgumentError,
            "quantized_matmul: x #{inspect(Nx.shape(x))} must end in k = #{k} (#{mode} weights)"
    end

    shape = put_elem(Nx.shape(x), tuple_size(Nx.shape(x)) - 1, n)
    out = Nx.template(shape, out_type)

    Nx.block(%__MODULE__.Matmul{type: num, k: k}, [x, raw], out, fn struct, x, raw ->
      __MODULE__.Matmul.composed(struct, x, raw, out_type)
    end)
  end

  @doc """
  The `{n, k}` matrix the ggml weight encodes, as `type` (default f32; the
  values are computed in f32 as ggml does, so f32 and f64 are exact).
  """
  def dequantize(%Emily.QuantizedWeight{value: raw, mode: mode}, type \\ {:f, 32}) do
    type = Nx.Type.normalize!(type)
    {num, k} = info!(mode, raw)
    {n, _} = Nx.shape(raw)
    out = Nx.template({n, k}, type)

    Nx.block(%__MODULE__.Dequantize{type: num, k: k}, [raw], out, fn struct, raw ->
      __MODULE__.Dequantize.composed(struct, raw, type)
    end)
  end

  defp type_name!(type) when is_atom(type) do
    if Map.has_key?(@types, type), do: type, else: bad_type!(type)
  end

  defp type_name!(type) when is_binary(type) do
    Enum.find(@names, &(Atom.to_string(&1) == type)) || bad_type!(type)
  end

  defp type_name!(type) when is_integer(type) do
    Enum.find(@names, &(elem(@types[&1], 0) == type)) || bad_type!(type)
  end

  defp type_name!(type), do: bad_type!(type)

  defp bad_type!(type) do
    raise ArgumentError,
          "ggml type #{inspect(type)} is not a block format (one of #{inspect(@names)} " <>
            "or their type numbers)"
  end

  # The type number and k of a weight's mode and raw blocks.
  defp info!(mode, raw) do
    name = type_name!(mode)
    {num, be, bb, _} = @types[name]
    {_n, row} = Nx.shape(raw)
    {num, div(row, bb) * be}
  end

  @doc false
  def block_info(num) do
    name = type_name!(num)
    {^num, be, bb, _} = @types[name]
    {name, be, bb}
  end

  # ---------------------------------------------------------------------------
  # Pure-Nx dequantization: the same f32 operations, in the same order, as
  # the engine and ggml, on any backend.
  # ---------------------------------------------------------------------------

  @doc false
  def composed_dequantize(raw, num) do
    {name, _be, bb} = block_info(num)
    {n, row} = Nx.shape(raw)
    nb = div(row, bb)
    blocks = Nx.reshape(raw, {n, nb, bb})
    w = decode(name, blocks)
    Nx.reshape(w, {n, :auto})
  end

  defp bytes(blocks, start, len), do: Nx.slice_along_axis(blocks, start, len, axis: 2)

  # The half-precision float at byte `off` of every block, as f32 {n, nb, 1}.
  defp half(blocks, off) do
    lo = bytes(blocks, off, 1) |> Nx.as_type({:u, 16})
    hi = bytes(blocks, off + 1, 1) |> Nx.as_type({:u, 16})
    bitwise_or(lo, left_shift(hi, 8)) |> Nx.bitcast({:f, 16}) |> Nx.as_type({:f, 32})
  end

  # 16 bytes of nibbles -> 32 quants: low nibbles first, then high.
  defp nibbles(qs) do
    Nx.concatenate([bitwise_and(qs, 15), right_shift(qs, 4)], axis: -1)
  end

  # Bit j of the little-endian u32 at `off` as quant j's fifth bit (16).
  defp fifth_bits(blocks, off) do
    qh =
      Enum.reduce(0..3, Nx.broadcast(Nx.tensor(0, type: :u32), {1}), fn i, acc ->
        byte = bytes(blocks, off + i, 1) |> Nx.as_type({:u, 32})
        bitwise_or(acc, left_shift(byte, 8 * i))
      end)

    right_shift(qh, Nx.iota({32}, type: :u32)) |> bitwise_and(1) |> left_shift(4)
  end

  defp f32(t), do: Nx.as_type(t, {:f, 32})
  defp signed(t), do: Nx.as_type(t, {:s, 32})

  defp decode(:q4_0, b),
    do: Nx.multiply(half(b, 0), f32(Nx.subtract(signed(nibbles(bytes(b, 2, 16))), 8)))

  defp decode(:q4_1, b),
    do: Nx.add(Nx.multiply(half(b, 0), f32(nibbles(bytes(b, 4, 16)))), half(b, 2))

  defp decode(:q5_0, b) do
    q = bitwise_or(signed(nibbles(bytes(b, 6, 16))), signed(fifth_bits(b, 2)))
    Nx.multiply(half(b, 0), f32(Nx.subtract(q, 16)))
  end

  defp decode(:q5_1, b) do
    q = bitwise_or(signed(nibbles(bytes(b, 8, 16))), signed(fifth_bits(b, 4)))
    Nx.add(Nx.multiply(half(b, 0), f32(q)), half(b, 2))
  end

  defp decode(:q8_0, b), do: Nx.multiply(f32(Nx.bitcast(bytes(b, 2, 32), {:s, 8})), half(b, 0))

  defp decode(:q4_k, b) do
    {n, nb, _} = Nx.shape(b)
    q = bytes(b, 16, 128) |> Nx.reshape({n, nb, 4, 1, 32})
    q = Nx.concatenate([bitwise_and(q, 15), right_shift(q, 4)], axis: 3)
    k_weights(b, Nx.reshape(q, {n, nb, 8, 32}))
  end

  defp decode(:q5_k, b) do
    {n, nb, _} = Nx.shape(b)
    q = bytes(b, 48, 128) |> Nx.reshape({n, nb, 4, 1, 32})
    q = Nx.concatenate([bitwise_and(q, 15), right_shift(q, 4)], axis: 3)
    qh = bytes(b, 16, 32) |> Nx.reshape({n, nb, 1, 32})
    high = right_shift(qh, Nx.iota({8, 1}, type: :u8)) |> bitwise_and(1) |> left_shift(4)
    k_weights(b, bitwise_or(Nx.reshape(q, {n, nb, 8, 32}), high))
  end

  defp decode(:q6_k, b) do
    {n, nb, _} = Nx.shape(b)
    ql = bytes(b, 0, 128) |> Nx.reshape({n, nb, 2, 64})
    ql = Nx.concatenate([bitwise_and(ql, 15), right_shift(ql, 4)], axis: -1)
    qh = bytes(b, 128, 64) |> Nx.reshape({n, nb, 2, 1, 32})
    qh = right_shift(qh, Nx.tensor([0, 2, 4, 6], type: :u8) |> Nx.reshape({4, 1}))
    qh = qh |> bitwise_and(3) |> Nx.reshape({n, nb, 2, 128})
    q = Nx.subtract(signed(bitwise_or(ql, left_shift(qh, 4))), 32) |> Nx.reshape({n, nb, 16, 16})
    scales = bytes(b, 192, 16) |> Nx.bitcast({:s, 8}) |> f32()
    dl = Nx.multiply(half(b, 208), scales) |> Nx.new_axis(-1)
    Nx.multiply(dl, f32(q))
  end

  # q4_k/q5_k: w = (d * scale) * q - (dmin * min) per sub-block of 32.
  defp k_weights(b, q) do
    sc = bytes(b, 4, 12)
    lo = bytes(sc, 0, 4)
    mid = bytes(sc, 4, 4)
    top = bytes(sc, 8, 4)

    scale =
      Nx.concatenate(
        [
          bitwise_and(lo, 63),
          bitwise_or(bitwise_and(top, 15), left_shift(right_shift(lo, 6), 4))
        ],
        axis: -1
      )

    min =
      Nx.concatenate(
        [
          bitwise_and(mid, 63),
          bitwise_or(right_shift(top, 4), left_shift(right_shift(mid, 6), 4))
        ],
        axis: -1
      )

    dl = Nx.multiply(half(b, 0), f32(scale)) |> Nx.new_axis(-1)
    ml = Nx.multiply(half(b, 2), f32(min)) |> Nx.new_axis(-1)
    Nx.subtract(Nx.multiply(dl, f32(q)), ml)
  end
end
