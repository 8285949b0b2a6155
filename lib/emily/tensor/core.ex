defmodule Emily.Tensor.Core do
  @moduledoc false
  # Plumbing shared by the Emily.Tensor implementation modules: wrapping
  # engine refs into %Emily.Tensor{}, turning numbers into scalar tensors,
  # casting, and option validation. Nothing here is public API.

  alias Emily.Native
  alias Emily.Tensor.Type

  @doc "Wraps an engine ref. The engine's pred results become u8 (a free view), as in Nx."
  def wrap(ref) do
    {ref, type} =
      case Native.dtype(ref) do
        {:pred, 8} -> {Native.bitcast(ref, {:u, 8}), {:u, 8}}
        type -> {ref, type}
      end

    %Emily.Tensor{ref: ref, shape: List.to_tuple(Native.shape(ref)), type: type}
  end

  @doc "The engine ref of a tensor."
  def ref!(%Emily.Tensor{ref: ref}), do: ref

  @doc """
  Converts a tensor or number to a tensor. Numbers get `type` when given,
  else their inferred type.
  """
  def to_tensor(x, type \\ nil)
  def to_tensor(%Emily.Tensor{} = t, nil), do: t
  def to_tensor(%Emily.Tensor{} = t, type), do: cast(t, type)

  def to_tensor(x, nil) when is_number(x) or is_atom(x) or is_struct(x, Emily.Complex),
    do: to_tensor(x, Type.infer(x))

  def to_tensor(x, type) when is_number(x) or is_atom(x) or is_struct(x, Emily.Complex),
    do: wrap(Native.scalar(encode_scalar(x, type), type))

  def to_tensor(other, _type),
    do: raise(ArgumentError, "expected a tensor or a number, got: #{inspect(other)}")

  @doc "Casts to `type` (no-op when equal)."
  def cast(%Emily.Tensor{type: type} = t, type), do: t
  def cast(%Emily.Tensor{ref: ref}, type), do: wrap(Native.as_type(ref, type))

  @doc "The type of a tensor or number for promotion."
  def type_of(%Emily.Tensor{type: type}), do: type
  def type_of(x), do: Type.infer(x)

  @doc """
  Native-endian bytes of one value of `type`. Integers wrap (as Nx does
  for literals that do not fit); floats round; `:nan`, `:infinity` and
  `:neg_infinity` are accepted for float and complex types.
  """
  def encode_scalar(x, {:c, bits}) do
    %Emily.Complex{re: re, im: im} =
      if is_struct(x, Emily.Complex), do: x, else: Emily.Complex.new(real_part(x))

    half = {:f, div(bits, 2)}
    encode_scalar(re, half) <> encode_scalar(im, half)
  end

  def encode_scalar(%Emily.Complex{}, type),
    do: raise(ArgumentError, "cannot convert a complex number to #{Type.to_string(type)}")

  def encode_scalar(x, {kind, bits}) when kind in [:u, :s] do
    n =
      cond do
        is_integer(x) -> x
        is_boolean(x) -> if(x, do: 1, else: 0)
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
      true -> encode_scalar(1.0, {:f, bits})
      false -> encode_scalar(0.0, {:f, bits})
      n when is_number(n) -> encode_finite(n * 1.0, bits)
      other -> raise ArgumentError, "cannot convert #{inspect(other)} to f#{bits}"
    end
  end

  defp real_part(x) when is_boolean(x), do: if(x, do: 1.0, else: 0.0)
  defp real_part(x), do: x

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

  @doc """
  Validates options like Nx (`Keyword.validate!`): unknown keys raise.
  `defaults` is a keyword list of allowed keys and their defaults.
  """
  def options!(opts, defaults) when is_list(opts) do
    case Keyword.validate(opts, defaults) do
      {:ok, opts} ->
        opts

      {:error, unknown} ->
        raise ArgumentError,
              "unknown keys #{inspect(unknown)} in #{inspect(opts)}, " <>
                "the allowed keys are: #{inspect(Enum.map(defaults, &option_key/1))}"
    end
  end

  defp option_key({key, _default}), do: key
  defp option_key(key) when is_atom(key), do: key

  # ---------------------------------------------------------------------------
  # Backend and device
  # ---------------------------------------------------------------------------

  @backend_key {Emily.Tensor, :default_backend}
  @devices [:cpu, :gpu]

  @doc """
  Normalises a backend spec: `Emily.Tensor` or `{Emily.Tensor, opts}` with
  `opts` a keyword list of `device: :cpu | :gpu` (default `:cpu`). Anything
  else raises: Emily is its own (single) backend.
  """
  def backend!(Emily.Tensor), do: {Emily.Tensor, device: :cpu}

  def backend!({Emily.Tensor, opts}) when is_list(opts) do
    opts = options!(opts, device: :cpu)

    unless opts[:device] in @devices do
      raise ArgumentError,
            "unknown device #{inspect(opts[:device])} for Emily.Tensor (expected one of #{inspect(@devices)})"
    end

    {Emily.Tensor, device: opts[:device]}
  end

  def backend!(other) do
    raise ArgumentError,
          "Emily has one backend, Emily.Tensor (as `Emily.Tensor` or " <>
            "`{Emily.Tensor, device: :cpu}`), got: #{inspect(other)}"
  end

  @doc "The backend new tensors get: the process's, else the application's, else the CPU."
  def default_backend do
    Process.get(@backend_key) ||
      backend!(Application.get_env(:emily, :default_backend, Emily.Tensor))
  end

  @doc """
  Stores `backend` (already normalised; nil clears it) as the process's
  default and returns the previous stored value (nil when there was none).
  """
  def swap_process_backend(nil), do: Process.delete(@backend_key)
  def swap_process_backend(backend), do: Process.put(@backend_key, backend)

  @doc "Sets the process's default backend (normalised); returns the previous one."
  def put_default_backend(backend) do
    previous = default_backend()
    Process.put(@backend_key, backend!(backend))
    previous
  end

  @doc """
  The device a creation function puts its result on: its `:backend` option
  when given (nil means the default backend), checked to be available (the
  GPU needs the CUDA plugin, a driver and a device). The single place that
  decides it.
  """
  def device_for(opts) when is_list(opts) do
    {Emily.Tensor, backend_opts} =
      case Keyword.get(opts, :backend) do
        nil -> default_backend()
        backend -> backend!(backend)
      end

    device!(backend_opts[:device])
  end

  @doc "Raises unless `device` is available here; returns it."
  def device!(:cpu), do: :cpu

  def device!(:gpu) do
    Emily.Device.check!("Emily.Tensor", :gpu)
    :gpu
  end

  @doc """
  `t` on `device`: itself when it is there already, else a transfer
  (`Emily.Tensor.to_device/2`: the only way data moves between devices).
  """
  def place(%Emily.Tensor{} = t, :cpu), do: if_elsewhere(t, :cpu)
  def place(%Emily.Tensor{} = t, :gpu), do: if_elsewhere(t, {:gpu, 0})

  defp if_elsewhere(t, device) do
    if Emily.Device.from_index(Native.array_device(t.ref)) == device,
      do: t,
      else: wrap(Native.to_device(t.ref, Emily.Device.to_index!(device)))
  end

  @doc "Normalises an axis against `rank` (negative counts from the end) or raises."
  def axis!(axis, rank) when is_integer(axis) do
    a = if axis < 0, do: axis + rank, else: axis

    if a < 0 or a >= rank do
      raise ArgumentError,
            "given axis (#{axis}) invalid for shape with rank #{rank}"
    end

    a
  end

  def axis!(axis, _rank),
    do: raise(ArgumentError, "expected an integer axis, got: #{inspect(axis)}")

  @doc "Normalises a list of axes (no repeats) or raises."
  def axes!(axes, rank) when is_list(axes) do
    normalized = Enum.map(axes, &axis!(&1, rank))

    if length(Enum.uniq(normalized)) != length(normalized) do
      raise ArgumentError, "axes #{inspect(axes)} must be unique"
    end

    normalized
  end
end
