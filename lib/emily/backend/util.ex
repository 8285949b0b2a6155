defmodule Emily.Backend.Util do
  @moduledoc false
  # Plumbing shared by the Emily.Backend families: getting the engine ref of
  # an input (transferring tensors of other backends), casting, wrapping an
  # engine ref into the `out` tensor Nx computed, scalars, and the check
  # that a type exists in the engine.

  alias Emily.Native
  alias Nx.Tensor, as: T

  # ---------------------------------------------------------------------------
  # Types
  # ---------------------------------------------------------------------------

  @doc """
  Returns `type` when the engine has it; raises `ArgumentError` naming the op
  and the type otherwise (sub-byte integers and the 8-bit floats: the engine
  stores one element per byte or more, and has no f8 kernels).
  """
  def engine_type!({kind, bits} = type, op) do
    cond do
      kind in [:u, :s] and bits in [8, 16, 32, 64] -> type
      kind == :f and bits in [16, 32, 64] -> type
      type == {:bf, 16} -> type
      kind == :c and bits in [64, 128] -> type
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
  `Nx.BinaryBackend` constant mixed into an op, say) is copied in through its
  binary, on the device `device` (the CPU unless the op's other inputs live
  on a GPU).
  """
  def ref(tensor, device \\ 0)
  def ref(%T{data: %Emily.Backend{ref: ref}}, _device), do: ref

  def ref(%T{type: type, shape: shape} = t, device) do
    engine_type!(type, "transfer")
    ref = Native.from_binary(Nx.to_binary(t), Tuple.to_list(shape), type)
    if device == 0, do: ref, else: Native.to_device(ref, device)
  end

  @doc """
  The engine refs of several inputs: tensors of other backends are brought
  to the device of the first Emily input, so that mixing a BinaryBackend
  constant into a GPU computation works.
  """
  def refs(tensors) do
    device =
      Enum.find_value(tensors, 0, fn
        %T{data: %Emily.Backend{ref: ref}} -> Native.array_device(ref)
        _ -> nil
      end)

    Enum.map(tensors, &ref(&1, device))
  end

  @doc "The ref of `tensor` converted to `type` (the same ref when equal)."
  def ref_as(%T{type: type} = t, type), do: ref(t)
  def ref_as(%T{} = t, type), do: cast(ref(t), type)

  @doc "Converts an engine ref to `type` (no node when it already has it)."
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
  so every family can rely on `out.type` being honoured. The result
  inherits the `stream:` of its inputs (see `stream_of/1`).
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
  def scalar(number, type), do: Native.scalar(encode_scalar(number, type), type)

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
end
