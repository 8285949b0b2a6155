defmodule Emily.Tensor.Creation do
  @moduledoc """
  Creation, conversion and metadata functions of `Emily.Tensor`, with
  Nx's semantics (`Nx.tensor/2`, `Nx.to_list/1`, `Nx.iota/2`, ...).

  Every function here is delegated from `Emily.Tensor`; call them there.
  """

  import Kernel, except: [byte_size: 1, bit_size: 1]
  import Bitwise
  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @typep tensor :: Emily.Tensor.t()

  # ---------------------------------------------------------------------------
  # tensor/2
  # ---------------------------------------------------------------------------

  @doc """
  Builds a tensor from a number, a boolean, `:nan`/`:infinity`/`:neg_infinity`,
  an `Emily.Complex`, a (rectangular, nested) list of those, or a tensor.

  The type is inferred as Nx does (integers s32, floats f32, booleans u8,
  complex c64; a list merges its elements' types) unless `:type` is given.
  Integer literals that do not fit the type wrap around.

  ## Options

    * `:type` - the type of the tensor
    * `:names` - only `nil` names are accepted (Emily has no named axes)
    * `:backend` - `Emily.Tensor` or `{Emily.Tensor, device: device}`
      (default: `Emily.Tensor.default_backend/0`); the device must be
      available in this build

  ## Examples

      iex> Emily.Tensor.tensor([1, 2, 3])
      #Emily.Tensor<
        s32[3]
        [1, 2, 3]
      >

      iex> Emily.Tensor.tensor([1.2, 2.3, 3.4, 4.5])
      #Emily.Tensor<
        f32[4]
        [1.2, 2.3, 3.4, 4.5]
      >

      iex> Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      #Emily.Tensor<
        s32[2][3]
        [
          [1, 2, 3],
          [4, 5, 6]
        ]
      >

      iex> Emily.Tensor.tensor([1, 2.0])
      #Emily.Tensor<
        f32[2]
        [1.0, 2.0]
      >

      iex> Emily.Tensor.tensor(300, type: :s8)
      #Emily.Tensor<
        s8
        44
      >

      iex> Emily.Tensor.tensor([:nan, :infinity, :neg_infinity])
      #Emily.Tensor<
        f32[3]
        [NaN, Inf, -Inf]
      >

      iex> Emily.Tensor.tensor([Emily.Complex.new(1, 2), Emily.Complex.new(3, -4)])
      #Emily.Tensor<
        c64[2]
        [1.0+2.0i, 3.0-4.0i]
      >

      iex> Emily.Tensor.tensor([[1, 2], [3]])
      ** (ArgumentError) lists have different shapes: expected a list of length 2 at the same level as [3]
  """
  @spec tensor(term(), keyword()) :: tensor()
  def tensor(arg, opts \\ []) do
    opts = Core.options!(opts, type: nil, names: nil, backend: nil)
    device = Core.device_for(opts)
    type = if t = opts[:type], do: Type.normalize!(t)
    arg |> build(type, opts[:names]) |> Core.place(device)
  end

  defp build(%Emily.Tensor{} = t, type, names) do
    check_names!(names, tuple_size(t.shape))

    if type != nil and type != t.type do
      raise ArgumentError,
            "Emily.Tensor.tensor/2 expects a tensor with type #{inspect(type)} " <>
              "but it was given a tensor of type #{inspect(t.type)}"
    end

    t
  end

  defp build(arg, type, names)
       when is_number(arg) or is_boolean(arg) or arg in [:nan, :infinity, :neg_infinity] or
              is_struct(arg, Emily.Complex) do
    check_names!(names, 0)
    Core.to_tensor(arg, type || Type.infer(arg))
  end

  defp build([], _type, _names), do: raise(ArgumentError, "cannot build an empty tensor")

  defp build(list, type, names) when is_list(list) do
    shape = list_shape(list, [])
    check_names!(names, length(shape))

    if Enum.any?(shape, &(&1 == 0)), do: raise(ArgumentError, "cannot build an empty tensor")

    flat = flatten!(list, shape, [])
    type = type || infer_list(flat)
    Core.wrap(Native.from_binary(encode_list(flat, type), shape, type))
  end

  defp build(other, _type, _names) do
    raise ArgumentError,
          "invalid value given to Emily.Tensor.tensor/2, got: #{inspect(other)}"
  end

  defp check_names!(nil, _rank), do: :ok

  defp check_names!(names, rank) when is_list(names) do
    cond do
      length(names) != rank ->
        raise ArgumentError,
              "invalid names for tensor of rank #{rank}, when specifying names " <>
                "every dimension must have a name or be nil, got: #{inspect(names)}"

      Enum.all?(names, &is_nil/1) ->
        :ok

      true ->
        raise ArgumentError, "named axes are not supported by Emily, got: #{inspect(names)}"
    end
  end

  defp check_names!(names, _rank),
    do: raise(ArgumentError, "expected :names to be a list, got: #{inspect(names)}")

  # The shape follows the first element at each level.
  defp list_shape([head | _] = list, acc) when is_list(head),
    do: list_shape(head, [length(list) | acc])

  defp list_shape(list, acc) when is_list(list), do: Enum.reverse([length(list) | acc])

  # Flattens in row-major order, checking every level has the expected
  # length (the accumulator is reversed at the end).
  defp flatten!(list, shape, acc) do
    list |> do_flatten(shape, acc) |> Enum.reverse()
  end

  defp do_flatten(list, [dim], acc) when is_list(list) do
    check_length!(list, dim)

    Enum.reduce(list, acc, fn
      x, _acc when is_list(x) ->
        raise ArgumentError,
              "lists have different shapes: expected a number at the same level as #{inspect(x)}"

      x, acc ->
        [x | acc]
    end)
  end

  defp do_flatten(list, [dim | dims], acc) when is_list(list) do
    check_length!(list, dim)
    Enum.reduce(list, acc, &do_flatten(&1, dims, &2))
  end

  defp do_flatten(other, [dim | _], _acc) do
    raise ArgumentError,
          "lists have different shapes: expected a list of length #{dim} " <>
            "at the same level as #{inspect(other)}"
  end

  defp check_length!(list, dim) do
    if length(list) != dim do
      raise ArgumentError,
            "lists have different shapes: expected a list of length #{dim} " <>
              "at the same level as #{inspect(list)}"
    end
  end

  defp infer_list([head | tail]) do
    Enum.reduce(tail, Type.infer(head), fn x, acc -> Type.merge(acc, Type.infer(x)) end)
  end

  defp encode_list(flat, {kind, bits} = type) when kind in [:u, :s] do
    for x <- flat, into: <<>> do
      if is_integer(x), do: <<x::size(bits)-native>>, else: Core.encode_scalar(x, type)
    end
  end

  defp encode_list(flat, {:f, bits} = type) when bits in [32, 64] do
    max = Type.max_finite(type)

    for x <- flat, into: <<>> do
      if is_float(x) and abs(x) <= max,
        do: <<x::float-size(bits)-native>>,
        else: Core.encode_scalar(x, type)
    end
  end

  defp encode_list(flat, type), do: for(x <- flat, into: <<>>, do: Core.encode_scalar(x, type))

  # ---------------------------------------------------------------------------
  # Reading back
  # ---------------------------------------------------------------------------

  @doc """
  Returns the tensor's elements as a nested list. Floats that are NaN or
  infinite come back as `:nan`, `:infinity` and `:neg_infinity`; complex
  elements as `Emily.Complex` structs. Raises for scalars (see
  `to_number/1`).

  ## Examples

      iex> Emily.Tensor.tensor([[1, 2], [3, 4]]) |> Emily.Tensor.to_list()
      [[1, 2], [3, 4]]

      iex> Emily.Tensor.tensor([1.0, :nan, :neg_infinity], type: :f16) |> Emily.Tensor.to_list()
      [1.0, :nan, :neg_infinity]
  """
  @spec to_list(tensor()) :: list()
  def to_list(%Emily.Tensor{shape: {}} = t) do
    raise ArgumentError,
          "cannot convert a scalar tensor to a list, got: #{inspect(t)}"
  end

  def to_list(%Emily.Tensor{shape: shape, type: type} = t) do
    flat = decode(read(t), type)
    nest(flat, Tuple.to_list(shape))
  end

  def to_list(other), do: other |> Core.to_tensor() |> to_list()

  defp nest(flat, [_]), do: flat

  defp nest(flat, [_ | dims]) do
    chunk = Enum.reduce(dims, 1, &(&1 * &2))

    if chunk == 0,
      do: [],
      else: flat |> Enum.chunk_every(chunk) |> Enum.map(&nest(&1, dims))
  end

  @doc """
  Returns the elements as a flat list in row-major order.

  ## Options

    * `:limit` - return at most this many elements

  ## Examples

      iex> Emily.Tensor.to_flat_list(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      [1, 2, 3, 4]

      iex> Emily.Tensor.to_flat_list(Emily.Tensor.tensor([[1, 2], [3, 4]]), limit: 3)
      [1, 2, 3]
  """
  @spec to_flat_list(tensor() | number(), keyword()) :: list()
  def to_flat_list(tensor, opts \\ []) do
    opts = Core.options!(opts, limit: nil)
    t = Core.to_tensor(tensor)
    decode(read(t, opts[:limit]), t.type)
  end

  @doc """
  Returns the value of a scalar tensor as an Elixir number (or `:nan`,
  `:infinity`, `:neg_infinity`, or an `Emily.Complex`).

  ## Examples

      iex> Emily.Tensor.to_number(Emily.Tensor.tensor(123))
      123

      iex> Emily.Tensor.to_number(Emily.Tensor.tensor(1.5, type: :bf16))
      1.5

      iex> Emily.Tensor.to_number(Emily.Tensor.tensor([1, 2]))
      ** (ArgumentError) cannot convert tensor of shape {2} to number
  """
  @spec to_number(tensor() | number()) :: term()
  def to_number(x) when is_number(x), do: x

  def to_number(%Emily.Tensor{shape: {}, type: type} = t) do
    [x] = decode(read(t), type)
    x
  end

  def to_number(%Emily.Tensor{shape: shape}),
    do: raise(ArgumentError, "cannot convert tensor of shape #{inspect(shape)} to number")

  def to_number(other), do: other |> Core.to_tensor() |> to_number()

  @doc """
  Returns the tensor's bytes: row-major, native endianness.

  ## Options

    * `:limit` - return the bytes of at most this many elements

  ## Examples

      iex> Emily.Tensor.to_binary(Emily.Tensor.tensor([1, 2, 3], type: :s8))
      <<1, 2, 3>>

      iex> Emily.Tensor.to_binary(Emily.Tensor.tensor([1, 2, 3], type: :u8), limit: 2)
      <<1, 2>>
  """
  @spec to_binary(tensor() | number(), keyword()) :: binary()
  def to_binary(tensor, opts \\ []) do
    opts = Core.options!(opts, limit: nil)
    tensor |> Core.to_tensor() |> read(opts[:limit])
  end

  # Reads the bytes of the first `limit` elements (all for nil).
  @doc false
  def read(%Emily.Tensor{ref: ref, shape: shape}, limit \\ nil) do
    size = shape_size(shape)

    cond do
      limit == nil or limit >= size ->
        Emily.to_binary(ref)

      not (is_integer(limit) and limit >= 0) ->
        raise ArgumentError,
              "expected :limit to be a non-negative integer, got: #{inspect(limit)}"

      true ->
        flat = Native.reshape(ref, [size])
        Emily.to_binary(Native.slice(flat, [0], [limit], [1]))
    end
  end

  @doc false
  # Decodes native-endian bytes of `type` into a flat list of Elixir values.
  def decode(bin, {:u, bits}), do: for(<<x::size(bits)-unsigned-native <- bin>>, do: x)
  def decode(bin, {:s, bits}), do: for(<<x::size(bits)-signed-native <- bin>>, do: x)
  def decode(bin, {:f, 64}), do: for(<<x::64-native <- bin>>, do: dec_f64(x))
  def decode(bin, {:f, 32}), do: for(<<x::32-native <- bin>>, do: dec_f32(x))
  def decode(bin, {:f, 16}), do: for(<<x::16-native <- bin>>, do: dec_f16(x))
  def decode(bin, {:bf, 16}), do: for(<<x::16-native <- bin>>, do: dec_f32(x <<< 16))

  def decode(bin, {:c, 64}) do
    for <<re::32-native, im::32-native <- bin>>,
      do: %Emily.Complex{re: dec_f32(re), im: dec_f32(im)}
  end

  def decode(bin, {:c, 128}) do
    for <<re::64-native, im::64-native <- bin>>,
      do: %Emily.Complex{re: dec_f64(re), im: dec_f64(im)}
  end

  defp dec_f64(bits) do
    case <<bits::64>> do
      <<x::float-64>> -> x
      _ -> non_finite(bits >>> 63, bits &&& 0xFFFFFFFFFFFFF)
    end
  end

  defp dec_f32(bits) do
    case <<bits::32>> do
      <<x::float-32>> -> x
      _ -> non_finite(bits >>> 31, bits &&& 0x7FFFFF)
    end
  end

  defp dec_f16(bits) do
    sign = if bits >>> 15 == 1, do: -1.0, else: 1.0
    exp = bits >>> 10 &&& 0x1F
    mant = bits &&& 0x3FF

    case exp do
      0x1F -> non_finite(bits >>> 15, mant)
      0 -> sign * mant * 5.960464477539063e-8
      _ -> sign * (1024 + mant) * :math.pow(2, exp - 25)
    end
  end

  defp non_finite(_sign, mant) when mant != 0, do: :nan
  defp non_finite(0, _), do: :infinity
  defp non_finite(1, _), do: :neg_infinity

  @doc """
  Builds a 1-D tensor from native-endian bytes.

  ## Examples

      iex> Emily.Tensor.from_binary(<<1, 2, 3, 4>>, :s8)
      #Emily.Tensor<
        s8[4]
        [1, 2, 3, 4]
      >

      iex> Emily.Tensor.from_binary(<<12.3::float-64-native>>, {:f, 64})
      #Emily.Tensor<
        f64[1]
        [12.3]
      >

      iex> Emily.Tensor.from_binary(<<1, 2, 3, 4>>, {:f, 64})
      ** (ArgumentError) binary does not match the given size
  """
  @spec from_binary(binary(), term(), keyword()) :: tensor()
  def from_binary(binary, type, opts \\ []) when is_binary(binary) do
    device = opts |> Core.options!(backend: nil) |> Core.device_for()
    type = Type.normalize!(type)
    size = Type.byte_size(type)

    if binary == "", do: raise(ArgumentError, "cannot build an empty tensor")

    if rem(Kernel.byte_size(binary), size) != 0,
      do: raise(ArgumentError, "binary does not match the given size")

    Core.wrap(Native.from_binary(binary, [div(Kernel.byte_size(binary), size)], type))
    |> Core.place(device)
  end

  @doc """
  Splits the tensor into batches of `batch_size` along axis 0 and returns
  them as a stream.

  ## Options

    * `:leftover` - when the axis is not a multiple of `batch_size`:
      `:repeat` (default) fills the last batch with rows from the start,
      `:discard` drops the incomplete batch

  ## Examples

      iex> [first, second] = Emily.Tensor.to_batched(Emily.Tensor.iota({2, 2, 2}), 1) |> Enum.to_list()
      iex> first
      #Emily.Tensor<
        s32[1][2][2]
        [
          [
            [0, 1],
            [2, 3]
          ]
        ]
      >
      iex> second
      #Emily.Tensor<
        s32[1][2][2]
        [
          [
            [4, 5],
            [6, 7]
          ]
        ]
      >

      iex> [_first, _second, third] = Emily.Tensor.to_batched(Emily.Tensor.iota({5, 2}), 2) |> Enum.to_list()
      iex> third
      #Emily.Tensor<
        s32[2][2]
        [
          [8, 9],
          [0, 1]
        ]
      >

      iex> Emily.Tensor.to_batched(Emily.Tensor.iota({5, 2}), 2, leftover: :discard) |> Enum.count()
      2
  """
  @spec to_batched(tensor(), pos_integer(), keyword()) :: Enumerable.t()
  def to_batched(tensor, batch_size, opts \\ [])
      when is_integer(batch_size) and batch_size >= 1 do
    opts = Core.options!(opts, leftover: :repeat)
    t = Core.to_tensor(tensor)

    if t.shape == {} do
      raise ArgumentError, "cannot batch scalar tensor #{inspect(t)}"
    end

    leftover = opts[:leftover]

    unless leftover in [:repeat, :discard] do
      raise ArgumentError,
            "expected :leftover to be :repeat or :discard, got: #{inspect(leftover)}"
    end

    [rows | rest] = Tuple.to_list(t.shape)
    rank = length(rest) + 1
    full = div(rows, batch_size)
    remaining = rem(rows, batch_size)

    if batch_size > rows and leftover == :discard do
      raise ArgumentError,
            "cannot batch non-divisible size #{rows} with batch size #{batch_size} " <>
              "and leftover: :discard"
    end

    slice = fn start, len ->
      Native.slice(
        t.ref,
        [start | List.duplicate(0, rank - 1)],
        [start + len | rest],
        List.duplicate(1, rank)
      )
    end

    batches =
      Stream.map(0..(full - 1)//1, fn i -> Core.wrap(slice.(i * batch_size, batch_size)) end)

    if remaining > 0 and leftover == :repeat do
      last =
        Stream.map([:last], fn :last ->
          tail = slice.(full * batch_size, remaining)
          fill = repeat_rows(t, slice, batch_size - remaining, rows)
          Core.wrap(Native.concatenate([tail | fill], 0))
        end)

      Stream.concat(batches, last)
    else
      batches
    end
  end

  # Rows from the start, cycling when the batch is larger than the tensor.
  defp repeat_rows(_t, _slice, 0, _rows), do: []

  defp repeat_rows(t, slice, needed, rows) do
    n = min(needed, rows)
    [slice.(0, n) | repeat_rows(t, slice, needed - n, rows)]
  end

  # ---------------------------------------------------------------------------
  # Metadata
  # ---------------------------------------------------------------------------

  @doc """
  The shape of a tensor or number; a shape tuple is validated and returned.

  ## Examples

      iex> Emily.Tensor.shape(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      {2, 3}
      iex> Emily.Tensor.shape(1)
      {}
      iex> Emily.Tensor.shape({1, 2, 3})
      {1, 2, 3}
  """
  @spec shape(tensor() | number() | tuple()) :: tuple()
  def shape(%Emily.Tensor{shape: shape}), do: shape
  def shape(x) when is_number(x) or is_struct(x, Emily.Complex), do: {}

  def shape(shape) when is_tuple(shape) do
    shape
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.each(fn {dim, i} ->
      unless is_integer(dim) and dim >= 0 do
        raise ArgumentError,
              "invalid dimension in axis #{i} in shape. Each dimension must be a " <>
                "non-negative integer, got #{inspect(dim)} in shape #{inspect(shape)}"
      end
    end)

    shape
  end

  def shape(other) do
    raise ArgumentError,
          "expected a shape as argument. A shape is a n-element tuple with the size of each " <>
            "dimension. Alternatively, you can pass a tensor (or a number) and the shape will " <>
            "be retrieved from the tensor. Got: #{inspect(other)}"
  end

  @doc """
  The type of a tensor (or the inferred type of a number).

  ## Examples

      iex> Emily.Tensor.type(Emily.Tensor.tensor([1, 2, 3]))
      {:s, 32}
      iex> Emily.Tensor.type(1.0)
      {:f, 32}
  """
  @spec type(tensor() | number()) :: Type.t()
  def type(%Emily.Tensor{type: type}), do: type
  def type(x), do: Type.infer(x)

  @doc """
  The number of axes of a tensor, number or shape.

  ## Examples

      iex> Emily.Tensor.rank(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      2
      iex> Emily.Tensor.rank(1)
      0
      iex> Emily.Tensor.rank({1, 2, 3})
      3
  """
  @spec rank(tensor() | number() | tuple()) :: non_neg_integer()
  def rank(x), do: tuple_size(shape(x))

  @doc """
  The number of elements of a tensor, number or shape.

  ## Examples

      iex> Emily.Tensor.size(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      6
      iex> Emily.Tensor.size(1)
      1
      iex> Emily.Tensor.size({1, 2, 3, 2})
      12
  """
  @spec size(tensor() | number() | tuple()) :: non_neg_integer()
  def size(x), do: shape_size(shape(x))

  @doc """
  The number of elements (Emily has no vectorized axes, so this equals
  `size/1`).

      iex> Emily.Tensor.flat_size(Emily.Tensor.iota({2, 3}))
      6
  """
  @spec flat_size(tensor() | number() | tuple()) :: non_neg_integer()
  def flat_size(x), do: size(x)

  defp shape_size(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))

  @doc """
  The number of bytes of the tensor's elements.

  ## Examples

      iex> Emily.Tensor.byte_size(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      24
      iex> Emily.Tensor.byte_size(Emily.Tensor.tensor([1, 2, 3], type: :u8))
      3
      iex> Emily.Tensor.byte_size(1)
      4
  """
  @spec byte_size(tensor() | number()) :: non_neg_integer()
  def byte_size(x) do
    t = Core.to_tensor(x)
    size(t) * Type.byte_size(t.type)
  end

  @doc """
  The number of bits of the tensor's elements.

      iex> Emily.Tensor.bit_size(Emily.Tensor.tensor([1, 2, 3], type: :s64))
      192
  """
  @spec bit_size(tensor() | number()) :: non_neg_integer()
  def bit_size(x), do: byte_size(x) * 8

  @doc """
  The axes of a tensor, number or shape: `[0, 1, ..., rank - 1]`.

  ## Examples

      iex> Emily.Tensor.axes(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      [0, 1]
      iex> Emily.Tensor.axes(1)
      []
      iex> Emily.Tensor.axes({1, 2, 3})
      [0, 1, 2]
  """
  @spec axes(tensor() | number() | tuple()) :: [non_neg_integer()]
  def axes(x), do: Enum.to_list(0..(rank(x) - 1)//1)

  @doc """
  The size of one axis (negative axes count from the end).

  ## Examples

      iex> Emily.Tensor.axis_size(Emily.Tensor.iota({100, 10, 20}), 0)
      100
      iex> Emily.Tensor.axis_size(Emily.Tensor.iota({100, 10, 20}), -1)
      20
  """
  @spec axis_size(tensor() | tuple(), integer()) :: non_neg_integer()
  def axis_size(tensor_or_shape, axis) do
    shape = shape(tensor_or_shape)
    elem(shape, Core.axis!(axis, tuple_size(shape)))
  end

  @doc """
  Whether two tensors (or numbers) have the same shape and type.

  ## Examples

      iex> Emily.Tensor.compatible?(Emily.Tensor.iota({3, 2}), Emily.Tensor.iota({3, 2}))
      true
      iex> Emily.Tensor.compatible?(Emily.Tensor.iota({3, 2}), Emily.Tensor.iota({2, 3}))
      false
      iex> Emily.Tensor.compatible?(Emily.Tensor.iota({3, 2}), Emily.Tensor.iota({3, 2}, type: :f32))
      false
  """
  @spec compatible?(term(), term()) :: boolean()
  def compatible?(left, right) do
    shape(left) == shape(right) and type(left) == type(right)
  end

  @doc """
  Converts a number, `Emily.Complex` or tensor to a tensor.

      iex> Emily.Tensor.to_tensor(1.5)
      #Emily.Tensor<
        f32
        1.5
      >
  """
  @spec to_tensor(term()) :: tensor()
  def to_tensor(%Emily.Tensor{} = t), do: t

  def to_tensor(x) when is_number(x) or is_struct(x, Emily.Complex) or is_boolean(x),
    do: Core.to_tensor(x)

  def to_tensor(other),
    do: raise(ArgumentError, "expected a %Emily.Tensor{} or a number, got: #{inspect(other)}")

  # ---------------------------------------------------------------------------
  # Casts
  # ---------------------------------------------------------------------------

  @doc """
  Changes the type of a tensor. Floats become integers by truncation (NaN
  gives 0, infinities the type's limits); complex becomes real by keeping
  the real part. Returns the tensor itself when the type is the same.

  ## Examples

      iex> Emily.Tensor.as_type(Emily.Tensor.tensor([0, 1, 2]), :f32)
      #Emily.Tensor<
        f32[3]
        [0.0, 1.0, 2.0]
      >

      iex> Emily.Tensor.as_type(Emily.Tensor.tensor([0.0, 1.0, 2.0]), :bf16)
      #Emily.Tensor<
        bf16[3]
        [0.0, 1.0, 2.0]
      >

      iex> Emily.Tensor.as_type(Emily.Tensor.tensor([0.0, 1.5, 2.9]), :s64)
      #Emily.Tensor<
        s64[3]
        [0, 1, 2]
      >

      iex> Emily.Tensor.as_type(Emily.Tensor.tensor([:nan, :infinity, :neg_infinity]), :s16)
      #Emily.Tensor<
        s16[3]
        [0, 32767, -32768]
      >
  """
  @spec as_type(tensor() | number(), term()) :: tensor()
  def as_type(tensor, type) do
    type = Type.normalize!(type)
    tensor |> Core.to_tensor() |> Core.cast(type)
  end

  @doc """
  Reinterprets the bytes of a tensor as another type of the same width.
  Complex types are not supported.

  ## Examples

      iex> Emily.Tensor.bitcast(Emily.Tensor.tensor([0, 0, 0], type: :s32), :f32)
      #Emily.Tensor<
        f32[3]
        [0.0, 0.0, 0.0]
      >

      iex> Emily.Tensor.bitcast(Emily.Tensor.tensor([0, 0, 0], type: :u16), :s32)
      ** (ArgumentError) input type width must match new type width, got input type {:u, 16} and output type {:s, 32}
  """
  @spec bitcast(tensor() | number(), term()) :: tensor()
  def bitcast(tensor, type) do
    %Emily.Tensor{type: {_, in_bits} = in_type} = t = Core.to_tensor(tensor)
    {_, out_bits} = type = Type.normalize!(type)

    if Type.complex?(in_type) or Type.complex?(type) do
      raise ArgumentError,
            "bitcast does not support complex types, got input type #{inspect(in_type)} " <>
              "and output type #{inspect(type)}"
    end

    if in_bits != out_bits do
      raise ArgumentError,
            "input type width must match new type width, got input type #{inspect(in_type)} " <>
              "and output type #{inspect(type)}"
    end

    if in_type == type, do: t, else: Core.wrap(Native.bitcast(t.ref, type))
  end

  # ---------------------------------------------------------------------------
  # Constructors
  # ---------------------------------------------------------------------------

  @doc """
  A tensor counting 0, 1, 2, ... along `:axis`, or in row-major order over
  the whole shape when no axis is given. The first argument is a shape or
  a tensor (whose shape is used).

  ## Options

    * `:type` - the type (default `{:s, 32}`)
    * `:axis` - count along this axis
    * `:names`, `:backend`, `:vectorized_axes` - accepted (names must be nil)

  ## Examples

      iex> Emily.Tensor.iota({})
      #Emily.Tensor<
        s32
        0
      >

      iex> Emily.Tensor.iota({5})
      #Emily.Tensor<
        s32[5]
        [0, 1, 2, 3, 4]
      >

      iex> Emily.Tensor.iota({3, 2, 3})
      #Emily.Tensor<
        s32[3][2][3]
        [
          [
            [0, 1, 2],
            [3, 4, 5]
          ],
          [
            [6, 7, 8],
            [9, 10, 11]
          ],
          [
            [12, 13, 14],
            [15, 16, 17]
          ]
        ]
      >

      iex> Emily.Tensor.iota({3, 3}, axis: 1)
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 1, 2],
          [0, 1, 2],
          [0, 1, 2]
        ]
      >

      iex> Emily.Tensor.iota({3, 3}, axis: -1)
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 1, 2],
          [0, 1, 2],
          [0, 1, 2]
        ]
      >

      iex> Emily.Tensor.iota({3, 4, 3}, axis: 0, type: {:f, 64})
      #Emily.Tensor<
        f64[3][4][3]
        [
          [
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0]
          ],
          [
            [1.0, 1.0, 1.0],
            [1.0, 1.0, 1.0],
            [1.0, 1.0, 1.0],
            [1.0, 1.0, 1.0]
          ],
          [
            [2.0, 2.0, 2.0],
            [2.0, 2.0, 2.0],
            [2.0, 2.0, 2.0],
            [2.0, 2.0, 2.0]
          ]
        ]
      >
  """
  @spec iota(tuple() | tensor(), keyword()) :: tensor()
  def iota(tensor_or_shape, opts \\ []) do
    opts =
      Core.options!(opts,
        axis: nil,
        names: nil,
        backend: nil,
        vectorized_axes: nil,
        type: {:s, 32}
      )

    device = Core.device_for(opts)
    shape = shape!(tensor_or_shape)
    check_names!(opts[:names], tuple_size(shape))
    type = Type.normalize!(opts[:type])
    dims = Tuple.to_list(shape)

    case opts[:axis] do
      nil ->
        size = shape_size(shape)
        flat = Native.iota([size], 0, type)
        Core.wrap(Native.reshape(flat, dims))

      axis ->
        axis = Core.axis!(axis, length(dims))
        Core.wrap(Native.iota(dims, axis, type))
    end
    |> Core.place(device)
  end

  defp shape!(%Emily.Tensor{shape: shape}), do: shape
  defp shape!(shape) when is_tuple(shape), do: shape(shape)

  defp shape!(other) do
    raise ArgumentError,
          "expected a shape tuple or a tensor, got: #{inspect(other)}"
  end

  @doc """
  An identity matrix: ones on the diagonal of the last two axes. Takes an
  integer `n` (an `n`×`n` matrix), a shape of rank 2 or more (batched), or
  a tensor (its shape).

  ## Options

    * `:type` - the type (default `{:s, 32}`)
    * `:names`, `:backend`, `:vectorized_axes` - accepted (names must be nil)

  ## Examples

      iex> Emily.Tensor.eye(2)
      #Emily.Tensor<
        s32[2][2]
        [
          [1, 0],
          [0, 1]
        ]
      >

      iex> Emily.Tensor.eye({3, 2}, type: :f32)
      #Emily.Tensor<
        f32[3][2]
        [
          [1.0, 0.0],
          [0.0, 1.0],
          [0.0, 0.0]
        ]
      >

      iex> Emily.Tensor.eye({2, 2, 2})
      #Emily.Tensor<
        s32[2][2][2]
        [
          [
            [1, 0],
            [0, 1]
          ],
          [
            [1, 0],
            [0, 1]
          ]
        ]
      >

      iex> Emily.Tensor.eye({3})
      ** (ArgumentError) eye/2 expects a shape with at least 2 dimensions or an integer, got: {3}
  """
  @spec eye(pos_integer() | tuple() | tensor(), keyword()) :: tensor()
  def eye(n_or_shape, opts \\ []) do
    opts = Core.options!(opts, names: nil, backend: nil, vectorized_axes: nil, type: {:s, 32})
    device = Core.device_for(opts)
    type = Type.normalize!(opts[:type])

    shape =
      case n_or_shape do
        n when is_integer(n) and n > 0 -> {n, n}
        other -> shape!(other)
      end

    if tuple_size(shape) < 2 do
      raise ArgumentError,
            "eye/2 expects a shape with at least 2 dimensions or an integer, got: #{inspect(shape)}"
    end

    check_names!(opts[:names], tuple_size(shape))
    Core.wrap(Native.eye(Tuple.to_list(shape), 0, type)) |> Core.place(device)
  end

  @doc """
  A tensor with the shape of `tensor` where every element is `value`.

  ## Options

    * `:type` - the type (default: the tensor's type)

  ## Examples

      iex> Emily.Tensor.fill(Emily.Tensor.tensor([1, 1, 1]), 5)
      #Emily.Tensor<
        s32[3]
        [5, 5, 5]
      >

      iex> Emily.Tensor.fill(Emily.Tensor.tensor([1, 1, 1]), 5, type: :f64)
      #Emily.Tensor<
        f64[3]
        [5.0, 5.0, 5.0]
      >
  """
  @spec fill(tensor() | number(), term(), keyword()) :: tensor()
  def fill(tensor, value, opts \\ []) do
    t = Core.to_tensor(tensor)
    opts = Core.options!(opts, type: t.type)
    type = Type.normalize!(opts[:type])
    v = Core.to_tensor(value, type)
    Core.wrap(Native.full(v.ref, Tuple.to_list(t.shape), type))
  end

  @doc """
  A u8 mask of shape `{n, m}` with ones on and below diagonal `:k`
  (k > 0 above the main diagonal, k < 0 below).

  ## Examples

      iex> Emily.Tensor.tri(3, 3)
      #Emily.Tensor<
        u8[3][3]
        [
          [1, 0, 0],
          [1, 1, 0],
          [1, 1, 1]
        ]
      >

      iex> Emily.Tensor.tri(3, 4, k: 1)
      #Emily.Tensor<
        u8[3][4]
        [
          [1, 1, 0, 0],
          [1, 1, 1, 0],
          [1, 1, 1, 1]
        ]
      >

      iex> Emily.Tensor.tri(3, 3, k: -1)
      #Emily.Tensor<
        u8[3][3]
        [
          [0, 0, 0],
          [1, 0, 0],
          [1, 1, 0]
        ]
      >
  """
  @spec tri(pos_integer(), pos_integer(), keyword()) :: tensor()
  def tri(n, m, opts \\ []) when is_integer(n) and is_integer(m) do
    opts = Core.options!(opts, k: 0)
    Core.wrap(tri_mask(n, m, k!(opts[:k]), :lower))
  end

  defp k!(k) when is_integer(k), do: k
  defp k!(k), do: raise(ArgumentError, "expected :k to be an integer, got: #{inspect(k)}")

  # A pred mask {n, m}: :lower is j <= i + k, :upper is j >= i + k.
  defp tri_mask(n, m, k, side) do
    rows = Native.iota([n, m], 0, {:s, 64})
    cols = Native.iota([n, m], 1, {:s, 64})
    shifted = Native.add(rows, Native.scalar_s64(k, {:s, 64}))

    case side do
      :lower -> Native.less_equal(cols, shifted)
      :upper -> Native.greater_equal(cols, shifted)
    end
  end

  @doc """
  Keeps the elements on and below diagonal `:k` of the last two axes and
  zeroes the rest. The tensor must have rank 2 or more.

  ## Examples

      iex> Emily.Tensor.tril(Emily.Tensor.iota({3, 3}))
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 0, 0],
          [3, 4, 0],
          [6, 7, 8]
        ]
      >

      iex> Emily.Tensor.tril(Emily.Tensor.iota({3, 4}), k: 1)
      #Emily.Tensor<
        s32[3][4]
        [
          [0, 1, 0, 0],
          [4, 5, 6, 0],
          [8, 9, 10, 11]
        ]
      >
  """
  @spec tril(tensor(), keyword()) :: tensor()
  def tril(tensor, opts \\ []), do: triangle(tensor, opts, :lower, "tril")

  @doc """
  Keeps the elements on and above diagonal `:k` of the last two axes and
  zeroes the rest. The tensor must have rank 2 or more.

  ## Examples

      iex> Emily.Tensor.triu(Emily.Tensor.iota({3, 3}))
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 1, 2],
          [0, 4, 5],
          [0, 0, 8]
        ]
      >

      iex> Emily.Tensor.triu(Emily.Tensor.iota({3, 4}), k: -1)
      #Emily.Tensor<
        s32[3][4]
        [
          [0, 1, 2, 3],
          [4, 5, 6, 7],
          [0, 9, 10, 11]
        ]
      >
  """
  @spec triu(tensor(), keyword()) :: tensor()
  def triu(tensor, opts \\ []), do: triangle(tensor, opts, :upper, "triu")

  defp triangle(tensor, opts, side, name) do
    opts = Core.options!(opts, k: 0)
    t = Core.to_tensor(tensor)
    rank = tuple_size(t.shape)

    if rank < 2 do
      raise ArgumentError,
            "#{name}/2 expects a tensor with at least 2 dimensions, got: #{inspect(t.shape)}"
    end

    n = elem(t.shape, rank - 2)
    m = elem(t.shape, rank - 1)
    mask = tri_mask(n, m, k!(opts[:k]), side)
    zero = Native.scalar_s64(0, t.type)
    Core.wrap(Native.select(mask, t.ref, zero))
  end

  @doc """
  `n` evenly spaced values from `start` to `stop` (scalars). With
  `endpoint: false` the interval is half-open.

  ## Options

    * `:n` - the number of values (required)
    * `:type` - the output type (default `{:f, 32}`); integer types
      truncate values computed in f32
    * `:endpoint` - whether `stop` is included (default `true`)
    * `:name` - accepted, must be nil

  ## Examples

      iex> Emily.Tensor.linspace(5, 8, n: 5)
      #Emily.Tensor<
        f32[5]
        [5.0, 5.75, 6.5, 7.25, 8.0]
      >

      iex> Emily.Tensor.linspace(0, 10, n: 5, endpoint: false)
      #Emily.Tensor<
        f32[5]
        [0.0, 2.0, 4.0, 6.0, 8.0]
      >

      iex> Emily.Tensor.linspace(0, 10, n: 5, type: {:u, 8})
      #Emily.Tensor<
        u8[5]
        [0, 2, 5, 7, 10]
      >

      iex> Emily.Tensor.linspace(0, 1, n: 10, endpoint: false, type: {:f, 64})
      #Emily.Tensor<
        f64[10]
        [0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7000000000000001, 0.8, 0.9]
      >
  """
  @spec linspace(term(), term(), keyword()) :: tensor()
  def linspace(start, stop, opts \\ []) do
    opts = Core.options!(opts, n: nil, name: nil, type: {:f, 32}, endpoint: true)
    n = opts[:n]

    unless is_integer(n) and n > 0 do
      raise ArgumentError, "expected n to be a positive integer, got: #{inspect(n)}"
    end

    if opts[:name] != nil do
      raise ArgumentError, "named axes are not supported by Emily, got: #{inspect(opts[:name])}"
    end

    type = Type.normalize!(opts[:type])
    calc = if Type.integer?(type), do: {:f, 32}, else: type
    start = Core.to_tensor(start, nil)
    stop = Core.to_tensor(stop, nil)

    for {t, what} <- [{start, "start"}, {stop, "stop"}], t.shape != {} do
      raise ArgumentError,
            "expected #{what} to be a scalar, got a tensor of shape #{inspect(t.shape)}"
    end

    start_ref = Core.cast(start, calc).ref
    stop_ref = Core.cast(stop, calc).ref
    divisor = if opts[:endpoint], do: n - 1, else: n

    out =
      if divisor == 0 do
        Native.full(start_ref, [n], calc)
      else
        step =
          Native.divide(Native.subtract(stop_ref, start_ref), Native.scalar_s64(divisor, calc))

        Native.add(Native.multiply(Native.iota([n], 0, calc), step), start_ref)
      end

    out |> Core.wrap() |> Core.cast(type)
  end

  # ---------------------------------------------------------------------------
  # Type shorthands
  # ---------------------------------------------------------------------------

  for {kind, bits} <- Type.all() do
    name = :"#{kind}#{bits}"

    @doc """
    Short for `tensor(value, type: #{inspect(name)})`.

        iex> Emily.Tensor.#{name}([1, 2])
        #Emily.Tensor<
          #{name}[2]
          #{if kind in [:u, :s], do: "[1, 2]", else: if(kind == :c, do: "[1.0+0.0i, 2.0+0.0i]", else: "[1.0, 2.0]")}
        >
    """
    @spec unquote(name)(term()) :: tensor()
    def unquote(name)(value), do: tensor(value, type: unquote({kind, bits}))
  end
end
