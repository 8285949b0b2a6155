defmodule Emily.Backend.Util do
  @moduledoc false
  # Plumbing shared by the Emily.Backend families: getting the engine ref of
  # an input (transferring tensors of other backends), casting, wrapping an
  # engine ref into the `out` tensor Nx computed, scalars, the engine type
  # of an Nx type, and the emulation of the 8-bit floats (see "8-bit
  # floats" below).

  alias Emily.Native
  alias Nx.Tensor, as: T

  # ---------------------------------------------------------------------------
  # Types
  # ---------------------------------------------------------------------------

  @f8_types [{:f, 8}, {:f8_e4m3fn, 8}]

  @doc """
  The engine type that holds tensors of the Nx type `type`: `type` itself,
  or f16 for the 8-bit floats (see "8-bit floats"). Raises `ArgumentError`
  naming the op and the type for the sub-byte integers (the engine stores
  one element per byte or more).
  """
  def engine_type!({kind, bits} = type, op) do
    cond do
      kind in [:u, :s] and bits in [8, 16, 32, 64] -> type
      kind == :f and bits in [16, 32, 64] -> type
      type == {:bf, 16} -> type
      kind == :c and bits in [64, 128] -> type
      type in @f8_types -> {:f, 16}
      true -> raise ArgumentError, "Emily.Backend.#{op}: the type #{type_name(type)} is not supported by Emily"
    end
  end

  @doc "Nx's short name of a type, as in `s32` or `f8_e4m3fn`."
  def type_name({:f8_e4m3fn, 8}), do: "f8_e4m3fn"
  def type_name({kind, bits}), do: "#{kind}#{bits}"

  # ---------------------------------------------------------------------------
  # Refs in, tensors out
  # ---------------------------------------------------------------------------

  @doc """
  The engine ref of an input tensor. A tensor of another backend (a
  `Nx.BinaryBackend` constant mixed into an op, say: Nx embeds the constants
  of `defn` expressions as BinaryBackend tensors) is copied in through its
  binary, on the device `device`: by default the process's default backend's
  device when that is Emily.Backend (where Nx would have created the tensor),
  else the CPU.
  """
  def ref(tensor, device \\ nil)
  def ref(%T{data: %Emily.Backend{ref: ref}}, _device), do: ref

  def ref(%T{type: type, shape: shape} = t, device) do
    ref = from_binary(Nx.to_binary(t), dims(shape), type, "transfer")

    case device || default_device() do
      0 -> ref
      device -> Native.to_device(ref, device)
    end
  end

  @doc "The engine device of the process's default backend (0, the CPU, unless it is a GPU Emily.Backend)."
  def default_device do
    case Nx.default_backend() do
      {Emily.Backend, opts} -> Emily.Backend.Creation.device_index(opts)
      _ -> 0
    end
  end

  @doc "`ref` placed on the device of `like` (an engine ref), for tensors an op makes itself."
  def on_device_of(ref, like) do
    case Native.array_device(like) do
      0 -> ref
      device -> Native.to_device(ref, device)
    end
  end

  @doc """
  An engine ref holding `binary` (iodata), the bytes of a tensor of the Nx
  type `type` (f8 bytes become f16 values); `op` names the caller in errors.
  """
  def from_binary(binary, dims, type, op) do
    # The type first: sub-byte types come as bitstrings, which are no iodata.
    storage = storage_type(type, op)
    binary |> IO.iodata_to_binary() |> Native.from_binary(dims, storage) |> from_storage(type)
  end

  @doc """
  The engine refs of several inputs: tensors of other backends are brought
  to the device of the first Emily input, so that mixing a BinaryBackend
  constant into a GPU computation works.
  """
  def refs(tensors) do
    device =
      Enum.find_value(tensors, fn
        %T{data: %Emily.Backend{ref: ref}} -> Native.array_device(ref)
        _ -> nil
      end) || default_device()

    Enum.map(tensors, &ref(&1, device))
  end

  @doc "The ref of `tensor` converted to `type` (the same ref when equal)."
  def ref_as(%T{type: type} = t, type), do: ref(t)
  def ref_as(%T{} = t, type), do: cast(ref(t), type)

  @doc """
  Converts an engine ref to the Nx type `type` (no node when it already
  has it). To an 8-bit float: to f16, then rounded to the type's values.
  """
  def cast(ref, type) when type in @f8_types, do: ref |> to_f16_sticky() |> round_f8(type)

  def cast(ref, type) do
    case Native.dtype(ref) do
      ^type -> ref
      # Nx's booleans are u8; the engine's pred is one byte of 0/1.
      {:pred, 8} when type == {:u, 8} -> Native.bitcast(ref, {:u, 8})
      _ -> Native.as_type(ref, type)
    end
  end

  @doc """
  Turns an engine ref into a predicate the engine's `select` accepts: the
  engine's own pred as it is, any other type as `x != 0`.
  """
  def pred(ref) do
    case Native.dtype(ref) do
      {:pred, 8} -> ref
      type -> Native.not_equal(ref, Native.scalar_s64(0, type))
    end
  end

  @doc """
  Wraps `ref` into `out`. The engine's `{:pred, 8}` results become u8 (a
  free bitcast); any other mismatch with the type Nx computed is converted,
  so every family can rely on `out.type` being honoured: this is where the
  f16 results of ops on 8-bit floats are rounded back to the f8 type. The
  result inherits the `stream:` of its inputs (see `stream_of/1`).
  """
  def wrap(%T{type: type} = out, ref, inputs \\ []) do
    %{out | data: %Emily.Backend{ref: cast(ref, type), stream: stream_of(inputs)}}
  end

  @doc """
  The stream a result evaluates on: the first one among its inputs that was
  created with a `stream:` backend option (nil: the process's current one).
  """
  def stream_of(inputs) do
    Enum.find_value(inputs, fn
      %T{data: %Emily.Backend{stream: stream}} -> stream
      _ -> nil
    end)
  end

  @doc "The dimensions of a shape tuple as a list."
  def dims(shape) when is_tuple(shape), do: Tuple.to_list(shape)

  # ---------------------------------------------------------------------------
  # Scalars
  # ---------------------------------------------------------------------------

  @doc "A 0-d engine tensor of `type` holding `number` (Nx's number rules)."
  def scalar(number, type) when type in @f8_types,
    do: Native.scalar(encode_scalar(number, type), {:u, 8}) |> from_storage(type)

  def scalar(number, type), do: Native.scalar(encode_scalar(number, type), type)

  @doc "An engine tensor of `type` and dimensions `dims` filled with `number`."
  def full(number, [], type), do: scalar(number, type)
  def full(number, dims, type), do: Native.full(scalar(number, type), dims, engine_type!(type, :full))

  @doc """
  Native-endian bytes of one value of `type`. Integers wrap (as Nx does for
  literals that do not fit), floats become integers by truncation, floats
  round to the nearest of the type; `:nan`, `:infinity`, `:neg_infinity`
  and `Complex` numbers are accepted for float and complex types.
  """
  def encode_scalar(x, {:c, bits}) do
    {re, im} =
      case x do
        %Complex{re: re, im: im} -> {re, im}
        other -> {other, 0.0}
      end

    half = {:f, div(bits, 2)}
    encode_scalar(re, half) <> encode_scalar(im, half)
  end

  def encode_scalar(%Complex{} = c, type),
    do: raise(ArgumentError, "cannot convert the complex number #{inspect(c)} to #{type_name(type)}")

  # The 8-bit floats as Nx writes literals (Nx.Floating): E5M2 is the upper
  # byte of the f16 (so finite values are truncated towards zero, unlike the
  # round to nearest of op results); E4M3FN saturates at ±448.
  def encode_scalar(x, {:f, 8}) do
    <<f16::16-native>> = encode_scalar(x, {:f, 16})
    <<Bitwise.bsr(f16, 8)>>
  end

  def encode_scalar(x, {:f8_e4m3fn, 8}), do: Nx.Floating.dump_f8_e4m3fn(x)

  def encode_scalar(x, {kind, bits}) when kind in [:u, :s] do
    n =
      cond do
        is_integer(x) -> x
        is_float(x) -> trunc(x)
        true -> raise ArgumentError, "cannot convert #{inspect(x)} to #{kind}#{bits}"
      end

    <<n::size(bits)-native>>
  end

  def encode_scalar(x, {:bf, 16}) do
    <<f32::32-native>> = encode_scalar(x, {:f, 32})
    # Round to nearest even on the upper 16 bits; NaN stays a quiet NaN.
    bits =
      if Bitwise.band(f32, 0x7FFFFFFF) > 0x7F800000 do
        Bitwise.bor(Bitwise.bsr(f32, 16), 0x40)
      else
        lsb = Bitwise.band(Bitwise.bsr(f32, 16), 1)
        Bitwise.bsr(f32 + 0x7FFF + lsb, 16)
      end

    <<bits::16-native>>
  end

  def encode_scalar(x, {:f, bits}) do
    case x do
      :nan -> nan(bits)
      :infinity -> inf(bits, 0)
      :neg_infinity -> inf(bits, 1)
      n when is_number(n) -> encode_finite(n * 1.0, bits)
      other -> raise ArgumentError, "cannot convert #{inspect(other)} to f#{bits}"
    end
  end

  # Elixir refuses to build a float that overflows the target width; such
  # values become infinities, as a float cast does.
  defp encode_finite(f, 16) when abs(f) >= 65520.0, do: inf(16, if(f < 0, do: 1, else: 0))

  defp encode_finite(f, 32) when abs(f) >= 3.4028235677973366e38,
    do: inf(32, if(f < 0, do: 1, else: 0))

  defp encode_finite(f, bits), do: <<f::float-size(bits)-native>>

  defp nan(16), do: <<0x7E00::16-native>>
  defp nan(32), do: <<0x7FC00000::32-native>>
  defp nan(64), do: <<0x7FF8000000000000::64-native>>

  defp inf(16, sign), do: <<Bitwise.bor(Bitwise.bsl(sign, 15), 0x7C00)::16-native>>
  defp inf(32, sign), do: <<Bitwise.bor(Bitwise.bsl(sign, 31), 0x7F800000)::32-native>>

  defp inf(64, sign),
    do: <<Bitwise.bor(Bitwise.bsl(sign, 63), 0x7FF0000000000000)::64-native>>

  # ---------------------------------------------------------------------------
  # 8-bit floats
  # ---------------------------------------------------------------------------
  #
  # The engine has no 8-bit floats, but every value of f8 (E5M2) and of
  # f8_e4m3fn (E4M3FN) is exact in f16. So a tensor of either type is an
  # engine f16 ref holding only values of its type ("on the grid"): ops run
  # on it in f16 as on any f16 tensor, and the conversions are in three
  # places of this module:
  #
  #   * `cast/2` to an f8 type (hence `wrap/3`, which every op's result goes
  #     through) rounds to the grid: `round_f8/2`;
  #   * the bytes of an f8 tensor (from_binary, to_binary, pointers,
  #     bitcast) are converted to and from f16 by `from_storage/2` and
  #     `to_storage/2`;
  #   * `encode_scalar/2` writes literals as Nx.Floating does.
  #
  # All of it is engine integer ops on the f16 bits (u16), so it is lazy and
  # runs on any device. In f16 bits (sign, 5 exponent bits with bias 15, 10
  # mantissa bits):
  #
  #   E5M2 is the upper byte of an f16: same exponent, the top 2 mantissa
  #   bits; Inf and NaN as in f16.
  #   E4M3FN (bias 7, 3 mantissa bits) normal values are the f16 values of
  #   exponent 9..23 with the low 7 mantissa bits zero: f16 bits
  #   (byte & 0x7F) << 7 + 0x2000; its subnormals are k·2^-9, k = 1..7; no
  #   infinities, NaN is S.1111.111 only, the largest finite value 448.

  @doc "How the bytes of a tensor of `type` are stored outside the engine."
  def storage_type(type, op) when type in @f8_types, do: engine_type!({:u, 8}, op)
  def storage_type(type, op), do: engine_type!(type, op)

  @doc "An engine ref read from bytes of `type` (`storage_type/2`) as the engine holds `type`."
  def from_storage(ref, {:f, 8}),
    do: ref |> Native.as_type({:u, 16}) |> shl(8) |> Native.bitcast({:f, 16})

  def from_storage(ref, {:f8_e4m3fn, 8}) do
    x = Native.as_type(ref, {:u, 16})
    sign = x |> band(0x80) |> shl(8)
    mag = band(x, 0x7F)
    normal = mag |> shl(7) |> Native.add(u16(0x2000))

    sub =
      mag
      |> Native.as_type({:f, 16})
      |> Native.multiply(Native.scalar_f64(0.001953125, {:f, 16}))
      |> Native.bitcast({:u, 16})

    mag
    |> Native.less(u16(8))
    |> Native.select(sub, normal)
    |> then(&Native.select(Native.equal(mag, u16(0x7F)), u16(0x7E00), &1))
    |> Native.bitwise_or(sign)
    |> Native.bitcast({:f, 16})
  end

  def from_storage(ref, _type), do: ref

  @doc "The bytes of `type` (`storage_type/2`) of an engine ref holding `type`."
  def to_storage(ref, {:f, 8}),
    do: ref |> Native.bitcast({:u, 16}) |> shr(8) |> Native.as_type({:u, 8})

  def to_storage(ref, {:f8_e4m3fn, 8}) do
    b = Native.bitcast(ref, {:u, 16})
    sign = b |> shr(8) |> band(0x80)
    a = band(b, 0x7FFF)
    normal = a |> Native.subtract(u16(0x2000)) |> shr(7)
    # k·2^-9 -> k; the minimum keeps the unused lanes' float-to-integer
    # conversion in range.
    sub =
      a
      |> Native.minimum(u16(0x2400))
      |> Native.bitcast({:f, 16})
      |> Native.multiply(Native.scalar_f64(512.0, {:f, 16}))
      |> Native.as_type({:u, 16})

    a
    |> Native.less(u16(0x2400))
    |> Native.select(sub, normal)
    |> then(&Native.select(Native.greater(a, u16(0x7C00)), u16(0x7F), &1))
    |> Native.bitwise_or(sign)
    |> Native.as_type({:u, 8})
  end

  def to_storage(ref, _type), do: ref

  # An f16 ref that rounds to the f8 grid as `ref` itself would: from a
  # wider type, rounding to f16 first and then to f8 could round twice (a
  # value just above a midpoint of the f8 grid becoming the midpoint, then
  # going to even), so the conversion to f16 rounds to odd (towards zero,
  # with the lowest bit set when inexact), which keeps every value off the
  # f8 grid's midpoints unless it is one.
  defp to_f16_sticky(ref) do
    case Native.dtype(ref) do
      {:f, 16} ->
        ref

      type ->
        # Integers, booleans and complex go through f32 first: f32 is exact
        # on the f8 types' range (2^24 > 57344), beyond which f8 is Inf or
        # saturated anyway.
        wide =
          if type in [{:f, 32}, {:f, 64}, {:bf, 16}], do: ref, else: Native.as_type(ref, {:f, 32})

        h = Native.as_type(wide, {:f, 16})
        back = Native.as_type(h, Native.dtype(wide))
        away = Native.greater(Native.abs(back), Native.abs(wide)) |> Native.as_type({:u, 16})
        inexact = Native.not_equal(back, wide) |> Native.as_type({:u, 16})

        h
        |> Native.bitcast({:u, 16})
        |> Native.subtract(away)
        |> Native.bitwise_or(inexact)
        |> Native.bitcast({:f, 16})
    end
  end

  # Rounds an f16 ref to the grid of an f8 type, to nearest even.
  defp round_f8(h, {:f, 8}) do
    b = Native.bitcast(h, {:u, 16})
    # A NaN keeps its upper byte, made a NaN of E5M2 when its payload was
    # in the lower byte only; Inf is on the grid; overflow rounds to Inf.
    nan_mantissa = Native.select(Native.equal(band(b, 0x300), u16(0)), u16(0x200), u16(0))
    nan = b |> band(0xFF00) |> Native.bitwise_or(nan_mantissa)

    Native.is_nan(h)
    |> Native.select(nan, rne_drop(b, 8))
    |> Native.bitcast({:f, 16})
  end

  defp round_f8(h, {:f8_e4m3fn, 8}) do
    b = Native.bitcast(h, {:u, 16})
    sign = band(b, 0x8000)
    # Saturation: beyond ±448 (Inf included) is ±448, as Nx.Floating
    # writes them (448 = 0x5F00 in f16).
    a = b |> band(0x7FFF) |> Native.minimum(u16(0x5F00))
    # Below 2^-6 (0x2400) the grid is k·2^-9: an f32 addition of 2^14,
    # whose ulp is 2^-9, rounds to it (the subtraction is exact).
    big = Native.scalar_f64(16384.0, {:f, 32})

    sub =
      a
      |> Native.bitcast({:f, 16})
      |> Native.as_type({:f, 32})
      |> Native.add(big)
      |> Native.subtract(big)
      |> Native.as_type({:f, 16})
      |> Native.bitcast({:u, 16})

    a
    |> Native.less(u16(0x2400))
    |> Native.select(sub, rne_drop(a, 7))
    |> then(&Native.select(Native.is_nan(h), u16(0x7E00), &1))
    |> Native.bitwise_or(sign)
    |> Native.bitcast({:f, 16})
  end

  # u16 bits rounded to nearest even at bit `n` (the low n bits cleared).
  # The carry of rounding up propagates into the exponent as it should.
  defp rne_drop(b, n) do
    lsb = b |> shr(n) |> band(1)

    b
    |> Native.add(u16(Bitwise.bsl(1, n - 1) - 1))
    |> Native.add(lsb)
    |> band(Bitwise.bnot(Bitwise.bsl(1, n) - 1) |> Bitwise.band(0xFFFF))
  end

  defp u16(n), do: Native.scalar_s64(n, {:u, 16})
  defp band(ref, n), do: Native.bitwise_and(ref, u16(n))
  defp shl(ref, n), do: Native.left_shift(ref, u16(n))
  defp shr(ref, n), do: Native.right_shift(ref, u16(n))
end
