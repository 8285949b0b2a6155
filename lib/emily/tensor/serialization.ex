defmodule Emily.Tensor.Serialization do
  @moduledoc """
  Reading and writing tensors as bytes: `serialize/2` and `deserialize/2`,
  numpy's `.npy` and `.npz` files (`load_numpy!/1`,
  `load_numpy_archive!/1`), and `to_heatmap/2`.

  `serialize/2` writes Nx's version-1 layout for a single tensor: the bytes
  `"nx"`, the version byte 1, an endianness byte (0 little, 1 big), the
  length of the header term as a big-endian 64-bit integer, the header term
  (`{:t, shape, type, names, vectorized_axes, offset, size}`, through
  `:erlang.term_to_binary/2`), then the raw data. Tuples, lists and maps of
  tensors are written as `{:container, kind, children}` headers of Emily's
  own, with the tensors' data concatenated in order.
  """

  alias Emily.Tensor.{Core, Type}

  @little if(<<1::16-native>> == <<1::16-little>>, do: 0, else: 1)

  @doc """
  Serializes a tensor (or a tuple, list or map of tensors) to a binary.
  Options go to `:erlang.term_to_binary/2` for the header (e.g.
  `compressed: 6`).

      iex> t = Emily.Tensor.tensor([1, 2, 3], type: :u8)
      iex> t |> Emily.Tensor.serialize() |> Emily.Tensor.deserialize() |> Emily.Tensor.to_list()
      [1, 2, 3]
  """
  def serialize(data, opts \\ []) do
    {header, buffers, _offset} = encode(data, [], 0)
    term = :erlang.term_to_binary(header, opts)
    IO.iodata_to_binary([<<"nx", 1, @little, byte_size(term)::64-big>>, term | Enum.reverse(buffers)])
  end

  defp encode(%Emily.Tensor{} = t, buffers, offset) do
    bin = Emily.Tensor.to_binary(t)
    names = List.duplicate(nil, tuple_size(t.shape))
    {{:t, t.shape, t.type, names, [], offset, byte_size(bin)}, [bin | buffers], offset + byte_size(bin)}
  end

  defp encode(tuple, buffers, offset) when is_tuple(tuple) do
    {children, buffers, offset} = encode_list(Tuple.to_list(tuple), buffers, offset)
    {{:container, :tuple, children}, buffers, offset}
  end

  defp encode(list, buffers, offset) when is_list(list) do
    {children, buffers, offset} = encode_list(list, buffers, offset)
    {{:container, :list, children}, buffers, offset}
  end

  defp encode(map, buffers, offset) when is_map(map) and not is_struct(map) do
    keys = map |> Map.keys() |> Enum.sort()
    {children, buffers, offset} = encode_list(Enum.map(keys, &Map.fetch!(map, &1)), buffers, offset)
    {{:container, :map, Enum.zip(keys, children)}, buffers, offset}
  end

  defp encode(number, buffers, offset) when is_number(number),
    do: encode(Core.to_tensor(number), buffers, offset)

  defp encode(other, _buffers, _offset),
    do: raise(ArgumentError, "serialize: cannot serialize #{inspect(other)}")

  defp encode_list(items, buffers, offset) do
    {children, {buffers, offset}} =
      Enum.map_reduce(items, {buffers, offset}, fn item, {buffers, offset} ->
        {child, buffers, offset} = encode(item, buffers, offset)
        {child, {buffers, offset}}
      end)

    {children, buffers, offset}
  end

  @doc """
  Reads back what `serialize/2` wrote. Options go to
  `:erlang.binary_to_term/2` (`[:safe]` is always added).
  """
  def deserialize(binary, opts \\ [])

  def deserialize(<<"nx", 1, endianness, size::64-big, term::binary-size(size), data::binary>>, opts) do
    header = :erlang.binary_to_term(term, Enum.uniq([:safe | opts]))
    decode(header, data, endianness)
  end

  def deserialize(other, _opts) when is_binary(other),
    do: raise(ArgumentError, "deserialize: not a serialized tensor (bad header)")

  defp decode({:t, shape, type, _names, _vectorized, offset, size}, data, endianness) do
    type = Type.normalize!(type)

    if offset + size > byte_size(data) do
      raise ArgumentError, "deserialize: data is truncated"
    end

    bytes = binary_part(data, offset, size) |> to_native(type, endianness)
    Emily.Tensor.from_binary(bytes, type) |> Emily.Tensor.reshape(shape)
  end

  defp decode({:container, :tuple, children}, data, e),
    do: children |> Enum.map(&decode(&1, data, e)) |> List.to_tuple()

  defp decode({:container, :list, children}, data, e), do: Enum.map(children, &decode(&1, data, e))

  defp decode({:container, :map, pairs}, data, e),
    do: Map.new(pairs, fn {k, child} -> {k, decode(child, data, e)} end)

  defp decode(other, _data, _e),
    do: raise(ArgumentError, "deserialize: unknown header #{inspect(other)}")

  defp to_native(bytes, _type, @little), do: bytes
  defp to_native(bytes, type, _other), do: swap_bytes(bytes, element_size(type))

  # Complex numbers swap each part on its own.
  defp element_size({:c, bits}), do: div(bits, 16)
  defp element_size({_, bits}), do: div(bits, 8)

  defp swap_bytes(bytes, 1), do: bytes

  defp swap_bytes(bytes, n),
    do: for(<<chunk::binary-size(n) <- bytes>>, into: <<>>, do: reverse_binary(chunk))

  defp reverse_binary(b), do: b |> :binary.bin_to_list() |> Enum.reverse() |> :binary.list_to_bin()

  # ---- numpy ---------------------------------------------------------------

  @doc """
  Loads a tensor from a numpy `.npy` binary (not a path: read the file
  with `File.read!/1` first), as Nx does. Supports numpy's bool, integer,
  float16/32/64 and complex64/128 arrays, either byte order, C or Fortran
  order.
  """
  def load_numpy!(<<0x93, "NUMPY", major, _minor, rest::binary>>) do
    {header, data} =
      case major do
        1 ->
          <<len::16-little, header::binary-size(len), data::binary>> = rest
          {header, data}

        v when v in [2, 3] ->
          <<len::32-little, header::binary-size(len), data::binary>> = rest
          {header, data}

        v ->
          raise ArgumentError, "load_numpy!: unsupported .npy version #{v}"
      end

    {type, endianness} = npy_descr!(header)
    shape = npy_shape!(header)
    fortran? = String.contains?(header, "'fortran_order': True")
    count = Enum.reduce(shape, 1, &(&1 * &2))
    nbytes = count * div(elem(type, 1), 8)

    if byte_size(data) < nbytes do
      raise ArgumentError, "load_numpy!: expected #{nbytes} bytes of data, got #{byte_size(data)}"
    end

    bytes = binary_part(data, 0, nbytes) |> to_native(type, endianness)
    flat = Emily.Tensor.from_binary(bytes, type)

    if fortran? do
      rank = length(shape)

      flat
      |> Emily.Tensor.reshape(shape |> Enum.reverse() |> List.to_tuple())
      |> Emily.Tensor.transpose(axes: Enum.to_list((rank - 1)..0//-1))
    else
      Emily.Tensor.reshape(flat, List.to_tuple(shape))
    end
  end

  def load_numpy!(_other), do: raise(ArgumentError, "load_numpy!: not a .npy binary")

  @npy_types %{
    "b1" => {:u, 8},
    "u1" => {:u, 8},
    "u2" => {:u, 16},
    "u4" => {:u, 32},
    "u8" => {:u, 64},
    "i1" => {:s, 8},
    "i2" => {:s, 16},
    "i4" => {:s, 32},
    "i8" => {:s, 64},
    "f2" => {:f, 16},
    "f4" => {:f, 32},
    "f8" => {:f, 64},
    "c8" => {:c, 64},
    "c16" => {:c, 128}
  }

  defp npy_descr!(header) do
    case Regex.run(~r/'descr':\s*'([<>|=])(\w+)'/, header) do
      [_, order, code] ->
        type = Map.get(@npy_types, code) || raise ArgumentError, "load_numpy!: unsupported dtype #{code}"
        {type, npy_endianness(order)}

      nil ->
        raise ArgumentError, "load_numpy!: header has no descr"
    end
  end

  # '<' is little endian, '>' big, '|' and '=' native.
  defp npy_endianness("<"), do: 0
  defp npy_endianness(">"), do: 1
  defp npy_endianness(_), do: @little

  defp npy_shape!(header) do
    case Regex.run(~r/'shape':\s*\(([^)]*)\)/, header) do
      [_, dims] -> dims |> String.split(",", trim: true) |> Enum.map(&(&1 |> String.trim() |> String.to_integer()))
      nil -> raise ArgumentError, "load_numpy!: header has no shape"
    end
  end

  @doc """
  Loads every array of a numpy `.npz` binary (stored or deflated) as a list
  of `{name, tensor}` pairs.
  """
  def load_numpy_archive!(archive) when is_binary(archive) do
    case :zip.unzip(archive, [:memory]) do
      {:ok, files} ->
        for {name, content} <- files do
          {name |> to_string() |> String.replace_suffix(".npy", ""), load_numpy!(content)}
        end

      {:error, reason} ->
        raise ArgumentError, "load_numpy_archive!: not a .npz archive (#{inspect(reason)})"
    end
  end

  # ---- heatmap -------------------------------------------------------------

  @doc """
  A heatmap view of a tensor of rank >= 2 for the terminal: `inspect/1`
  of the result shades each entry with 24 grey levels (ANSI 256 colours)
  between the tensor's min and max. Options: `:ansi_enabled` (default
  `IO.ANSI.enabled?/0`), `:ansi_whitespace` (the filler, default `"\\u3000"`).
  Without ANSI the levels print as digits 0-9.
  """
  def to_heatmap(tensor, opts \\ []) do
    opts = Core.options!(opts, ansi_enabled: IO.ANSI.enabled?(), ansi_whitespace: "\u3000")
    t = Core.to_tensor(tensor)

    if tuple_size(t.shape) < 2 do
      raise ArgumentError, "to_heatmap: expected a tensor of rank >= 2, got #{inspect(t.shape)}"
    end

    struct!(Emily.Tensor.Heatmap, tensor: t, opts: opts)
  end
end

defmodule Emily.Tensor.Heatmap do
  @moduledoc "The result of `Emily.Tensor.to_heatmap/2`; print it with `inspect/1`."
  defstruct [:tensor, :opts]

  defimpl Inspect do
    def inspect(%{tensor: t, opts: opts}, _inspect_opts) do
      values = t |> Emily.Tensor.as_type(:f64) |> Emily.Tensor.to_flat_list()
      finite = Enum.filter(values, &is_float/1)
      {lo, hi} = if finite == [], do: {0.0, 0.0}, else: Enum.min_max(finite)
      {rows, cols} = {div(length(values), elem(t.shape, tuple_size(t.shape) - 1)), elem(t.shape, tuple_size(t.shape) - 1)}

      lines =
        values
        |> Enum.chunk_every(cols)
        |> Enum.take(rows)
        |> Enum.map(fn row -> Enum.map_join(row, "", &cell(&1, lo, hi, opts)) end)

      reset = if opts[:ansi_enabled], do: IO.ANSI.reset(), else: ""
      "#Emily.Heatmap<\n  #{Emily.Tensor.Type.to_string(t.type)}#{shape(t.shape)}\n" <>
        Enum.map_join(lines, "\n", &("  " <> &1 <> reset)) <> "\n>"
    end

    defp shape(shape), do: shape |> Tuple.to_list() |> Enum.map_join(&"[#{&1}]")

    defp level(v, lo, hi) when is_float(v) and hi > lo, do: round((v - lo) / (hi - lo) * 23)
    defp level(v, _lo, _hi) when is_float(v), do: 0
    defp level(:neg_infinity, _, _), do: 0
    defp level(_, _, _), do: 23

    defp cell(v, lo, hi, opts) do
      l = level(v, lo, hi)

      if opts[:ansi_enabled],
        do: IO.ANSI.color_background(232 + l) <> opts[:ansi_whitespace],
        else: Integer.to_string(div(l * 10, 24))
    end
  end
end
