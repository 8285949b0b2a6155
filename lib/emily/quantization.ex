defmodule Emily.Quantization do
  @moduledoc """
  Weight quantization: MLX's affine format (see `Emily.QuantizedWeight`) and
  the matrix product that reads it without dequantizing.

  `quantized_matmul/2` and `dequantize/1` work eagerly and inside `defn`:
  they emit an `Nx.block/4` whose struct carries an engine kernel (run under
  `Emily.Backend` and `Emily.Compiler`) and whose default is pure Nx
  (`dequantize_defn/1`, then `Nx.dot/4`), so any backend or compiler gives
  the same result. On the CPU the kernel streams the packed words once for
  decoding-sized inputs (up to 8 rows of `x`) and multiplies dequantized f32
  tiles with BLAS otherwise; the GPU has its own kernels. The gradient flows
  to `x` only.

  ## Examples

      iex> w = Nx.iota({4, 64}, type: :f32) |> Nx.divide(100)
      iex> qw = Emily.Quantization.quantize(w, group_size: 64, bits: 8)
      iex> x = Nx.broadcast(1.0, {1, 64})
      iex> y = Emily.Quantization.quantized_matmul(x, qw)
      iex> Nx.all_close(y, Nx.dot(x, [1], w, [1]), atol: 1.0e-2) |> Nx.to_number()
      1
  """

  import Nx.Defn

  alias Emily.Backend.Util
  alias Emily.Native
  alias Emily.QuantizedWeight

  @bits [2, 3, 4, 5, 6, 8]
  @group_sizes [32, 64, 128]
  @float_types [{:f, 32}, {:f, 16}, {:bf, 16}]
  @ggml Emily.Quantization.GGML

  @doc "The bits `dequantize_defn/1` (and every function here) takes: `[2, 3, 4, 5, 6, 8]`."
  def defn_supported_bits, do: @bits

  @doc """
  Quantizes `w` (a float tensor of rank >= 2) along its last axis into an
  `Emily.QuantizedWeight`. Options as `Emily.QuantizedWeight.from_dense/2`.

  Runs on the engine; the result's tensors are on `w`'s backend.
  """
  @spec quantize(Nx.Tensor.t(), keyword()) :: QuantizedWeight.t()
  def quantize(%Nx.Tensor{} = w, opts \\ []) do
    opts = Keyword.validate!(opts, group_size: 64, bits: 4, transpose: true, mode: "affine")
    {gs, bits, mode} = {opts[:group_size], opts[:bits], opts[:mode]}

    unless mode == "affine" do
      raise ArgumentError,
            "Emily.Quantization.quantize: mode must be \"affine\" (ggml modes are built by " <>
              "Emily.Quantization.GGML), got: #{inspect(mode)}"
    end

    check_format!("quantize", gs, bits)
    check_transpose!(opts[:transpose])

    cond do
      w.type not in @float_types ->
        raise ArgumentError,
              "Emily.Quantization.quantize: w must be f32, f16 or bf16, got #{describe(w)}"

      tuple_size(w.shape) < 2 ->
        raise ArgumentError,
              "Emily.Quantization.quantize: w must have rank >= 2, got #{describe(w)}"

      rem(elem(w.shape, tuple_size(w.shape) - 1), gs) != 0 ->
        raise ArgumentError,
              "Emily.Quantization.quantize: the last axis of w #{describe(w)} must be a " <>
                "multiple of group_size #{gs}"

      true ->
        :ok
    end

    {wq, s, b} = Native.quantize(Util.ref(w), gs, bits)

    # The packed tensors live where w lives.
    [value, scales, biases] =
      for ref <- [wq, s, b] do
        t = wrap_ref(ref)

        case w.data do
          %Emily.Backend{} -> t
          %backend{} -> Nx.backend_transfer(t, backend)
        end
      end

    %QuantizedWeight{
      value: value,
      scales: scales,
      biases: biases,
      group_size: gs,
      bits: bits,
      transpose: opts[:transpose],
      mode: "affine"
    }
  end

  @doc """
  The float matrix of a quantized weight (the scales' type), in the layout
  it was quantized from. Eager or inside `defn`; ggml modes go to
  `Emily.Quantization.GGML.dequantize/2`.
  """
  deftransform dequantize(%QuantizedWeight{} = qw) do
    if qw.mode == "affine" do
      check_weight!("dequantize", qw)
      %{value: v, scales: s, biases: b} = qw
      out = Nx.template(dense_shape(qw), s.type)

      Nx.block(
        %Emily.Quantization.Dequantize{group_size: qw.group_size, bits: qw.bits},
        [v, s, b],
        out,
        fn _struct, v, s, b -> unpack(v, s, b, qw.group_size, qw.bits) end
      )
    else
      ggml!(:dequantize, [qw, qw.scales.type], qw.mode)
    end
  end

  @doc """
  `x @ wᵀ` (`transpose: true`) or `x @ w` of a quantized weight, without
  dequantizing it. `x` has shape `{..., in}` and the scales' type (convert
  with `Nx.as_type/2` first); the result is `{..., out}` in that type.

  Eager or inside `defn` (one `Nx.block/4`: the engine kernel on Emily,
  `Nx.dot(x, dequantize_defn(qw))` elsewhere). ggml modes go to
  `Emily.Quantization.GGML.quantized_matmul/2`.
  """
  deftransform quantized_matmul(x, %QuantizedWeight{} = qw) do
    if qw.mode == "affine" do
      qmm(x, qw)
    else
      ggml!(:quantized_matmul, [x, qw], qw.mode)
    end
  end

  @doc "`quantized_matmul/2` (the name code written for the original Emily uses)."
  deftransform(quantized_matmul_defn(x, %QuantizedWeight{} = qw), do: quantized_matmul(x, qw))

  @doc """
  The float matrix of a quantized weight in pure Nx (any backend, inside
  `defn` or not): the codes unpacked with shifts and masks, then
  `code * scale` and `+ bias`, each rounded to the scales' type as MLX
  computes them (bit-identical to the engine's dequantize). ggml modes go
  to `Emily.Quantization.GGML.dequantize/2`.
  """
  deftransform dequantize_defn(%QuantizedWeight{} = qw) do
    if qw.mode == "affine" do
      check_weight!("dequantize_defn", qw)
      unpack(qw.value, qw.scales, qw.biases, qw.group_size, qw.bits)
    else
      ggml!(:dequantize, [qw, qw.scales.type], qw.mode)
    end
  end

  # ---- affine, the block ------------------------------------------------------

  defp qmm(x, qw) do
    check_weight!("quantized_matmul", qw)
    x = Nx.to_tensor(x)
    %{value: v, scales: s, biases: b, transpose: transpose} = qw

    if tuple_size(v.shape) != 2 do
      raise ArgumentError,
            "Emily.Quantization.quantized_matmul: the weight must be 2-D, got value #{describe(v)}"
    end

    {rows, len} = dense_shape(qw)
    {k, n} = if transpose, do: {len, rows}, else: {rows, len}
    rank = tuple_size(x.shape)

    cond do
      x.type != s.type ->
        raise ArgumentError,
              "Emily.Quantization.quantized_matmul: x #{describe(x)} must have the type of the " <>
                "scales #{describe(s)} (convert it with Nx.as_type(x, #{inspect(s.type)}))"

      rank < 1 or elem(x.shape, rank - 1) != k ->
        raise ArgumentError,
              "Emily.Quantization.quantized_matmul: the last axis of x #{describe(x)} must be " <>
                "#{k}, the input size of the weight (value #{describe(v)}, bits #{qw.bits}, " <>
                "transpose #{transpose})"

      true ->
        :ok
    end

    out = Nx.template(put_elem(x.shape, rank - 1, n), x.type)
    gs = qw.group_size
    bits = qw.bits

    Nx.block(
      %Emily.Quantization.QuantizedMatmul{transpose: transpose, group_size: gs, bits: bits},
      [x, v, s, b],
      out,
      fn _struct, x, v, s, b ->
        w = unpack(v, s, b, gs, bits)
        contract = if transpose, do: 1, else: 0
        Nx.dot(x, [Nx.rank(x) - 1], w, [contract])
      end
    )
  end

  # ---- pure-Nx unpacking ------------------------------------------------------

  # Code i of a row sits at bit i * bits: word (i * bits) >>> 5, shift
  # (i * bits) &&& 31; when shift + bits > 32 its high part is the low bits
  # of the next word.
  defp unpack(v, s, b, gs, bits) do
    rank = tuple_size(v.shape)
    words = elem(v.shape, rank - 1)
    len = div(words * 32, bits)
    bit = Nx.multiply(Nx.iota({len}, type: {:u, 32}), bits)
    word = Nx.right_shift(bit, 5)
    shift = Nx.bitwise_and(bit, 31)
    next = Nx.min(Nx.add(word, 1), words - 1)
    straddle = Nx.greater(Nx.add(shift, bits), 32)
    lo = Nx.right_shift(Nx.take(v, word, axis: rank - 1), shift)
    hi_shift = Nx.select(straddle, Nx.subtract(32, shift), 0)
    hi = Nx.left_shift(Nx.take(v, next, axis: rank - 1), hi_shift)
    hi = Nx.multiply(hi, Nx.as_type(straddle, {:u, 32}))
    codes = Nx.bitwise_and(Nx.bitwise_or(lo, hi), Bitwise.bsl(1, bits) - 1)

    type = s.type
    scales = repeat_groups(s, gs)
    biases = repeat_groups(b, gs)
    Nx.add(Nx.multiply(Nx.as_type(codes, type), scales), biases)
  end

  # {..., g} -> {..., g * gs}, each value gs times.
  defp repeat_groups(t, gs) do
    shape = t.shape
    rank = tuple_size(shape)
    g = elem(shape, rank - 1)

    t
    |> Nx.new_axis(rank)
    |> Nx.broadcast(Tuple.insert_at(shape, rank, gs))
    |> Nx.reshape(put_elem(shape, rank - 1, g * gs))
  end

  # ---- checks -----------------------------------------------------------------

  defp dense_shape(%QuantizedWeight{value: v, bits: bits}) do
    rank = tuple_size(v.shape)
    put_elem(v.shape, rank - 1, div(elem(v.shape, rank - 1) * 32, bits))
  end

  defp check_format!(op, gs, bits) do
    unless gs in @group_sizes do
      raise ArgumentError,
            "Emily.Quantization.#{op}: group_size must be 32, 64 or 128, got: #{inspect(gs)}"
    end

    unless bits in @bits do
      raise ArgumentError,
            "Emily.Quantization.#{op}: bits must be 2, 3, 4, 5, 6 or 8, got: #{inspect(bits)}"
    end
  end

  defp check_transpose!(t) when is_boolean(t), do: :ok

  defp check_transpose!(t),
    do:
      raise(ArgumentError, "Emily.Quantization: transpose must be a boolean, got: #{inspect(t)}")

  defp check_weight!(op, %QuantizedWeight{value: v, scales: s, biases: b} = qw) do
    check_format!(op, qw.group_size, qw.bits)
    rank = tuple_size(v.shape)

    ok =
      v.type == {:u, 32} and rank >= 1 and s.type in @float_types and b.type == s.type and
        s.shape == b.shape and tuple_size(s.shape) == rank and
        Tuple.delete_at(s.shape, rank - 1) == Tuple.delete_at(v.shape, rank - 1) and
        elem(s.shape, rank - 1) * qw.group_size == div(elem(v.shape, rank - 1) * 32, qw.bits) and
        rem(elem(v.shape, rank - 1) * 32, qw.bits) == 0

    unless ok do
      raise ArgumentError,
            "Emily.Quantization.#{op}: value #{describe(v)}, scales #{describe(s)} and biases " <>
              "#{describe(b)} do not form a quantized weight with group_size #{qw.group_size} " <>
              "and bits #{qw.bits} (value u32 {..., rows, len * bits / 32}; scales and biases " <>
              "of one float type, {..., rows, len / group_size})"
    end
  end

  defp describe(%{type: type, shape: shape}),
    do: "#{Util.type_name(type)}#{inspect(Tuple.to_list(shape), charlists: :as_lists)}"

  # ggml block formats live in Emily.Quantization.GGML (a separate module;
  # called through apply/3 so that this one compiles without it).
  defp ggml!(fun, args, mode) do
    if Code.ensure_loaded?(@ggml) and function_exported?(@ggml, fun, length(args)) do
      apply(@ggml, fun, args)
    else
      raise ArgumentError,
            "Emily.Quantization.#{fun}: mode #{inspect(mode)} needs Emily.Quantization.GGML, " <>
              "which is not available in this build"
    end
  end

  defp wrap_ref(ref) do
    shape = List.to_tuple(Native.shape(ref))
    type = Native.dtype(ref)
    names = List.duplicate(nil, tuple_size(shape))
    %Nx.Tensor{data: %Emily.Backend{ref: ref}, shape: shape, type: type, names: names}
  end
end
