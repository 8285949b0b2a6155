defmodule Emily.SafeTensors do
  @moduledoc """
  Reads and writes [safetensors](https://github.com/huggingface/safetensors)
  files with libemily's own parser.

  `read!/2` maps the file and returns tensors on `Emily.Backend` that alias
  the mapped bytes: nothing is copied, and the operating system pages the
  weights in when a tensor is first used. The mapping stays alive while any
  of the tensors does. The header is checked in full first (offsets inside
  the file, sizes matching shapes and dtypes, no overlapping tensors, no
  duplicate names), and a bad file raises `ArgumentError` naming the file,
  the field and the byte offset.

  Tensors are CPU arrays; move them with `Nx.backend_transfer/2` to a
  device. The names and results follow the `safetensors` Hex package
  (`Safetensors.read!/2`), which Bumblebee uses: a map of name to tensor,
  with `BOOL` read as `{:u, 8}`. Beyond that package, `F8_E4M3` and
  `F8_E5M2` read as Nx's `{:f8_e4m3fn, 8}` and `{:f, 8}`; other dtypes the
  engine lacks (`F8_E8M0`, `F6_*`, `F4`) raise `ArgumentError` naming them.
  """

  alias Emily.Native

  @doc """
  Reads every tensor of the file at `path`: a map of name to tensor.

  ## Options

    * `:only` - a list of tensor names to read (default: all)
    * `:lazy` - accepted for compatibility with `Safetensors.read!/2`;
      tensors are always mapped, never read eagerly
  """
  @spec read!(Path.t(), keyword()) :: %{String.t() => Nx.Tensor.t()}
  def read!(path, opts \\ []) do
    opts = Keyword.validate!(opts, only: nil, lazy: false)
    file = Native.safetensors_open(path)
    {tensors, _metadata} = Native.safetensors_info(file)
    only = opts[:only] && MapSet.new(opts[:only])

    for {name, dtype_name, _type, shape} <- tensors,
        only == nil or MapSet.member?(only, name),
        into: %{} do
      {name, get(file, name, dtype_name, shape)}
    end
  end

  # 8-bit floats, which the engine has no dtype for, are held as Emily.Backend
  # holds them (an f16 ref on the type's grid, see Emily.Backend.Util): their
  # bytes are mapped as u8 and widened lazily.
  @f8 %{"F8_E4M3" => {:f8_e4m3fn, 8}, "F8_E5M2" => {:f, 8}}

  defp get(file, name, dtype_name, shape) do
    case @f8 do
      %{^dtype_name => type} ->
        ref =
          file
          |> Native.safetensors_get_bytes(name)
          |> Native.reshape(shape)
          |> Emily.Backend.Util.from_storage(type)

        shape = List.to_tuple(shape)

        %Nx.Tensor{
          data: %Emily.Backend{ref: ref},
          shape: shape,
          type: type,
          names: List.duplicate(nil, tuple_size(shape))
        }

      _ ->
        wrap(Native.safetensors_get(file, name))
    end
  end

  @doc """
  Reads a sharded checkpoint: `path` is the index JSON
  (`model.safetensors.index.json`) or the directory holding it. Its
  `weight_map` names the shard of each tensor; shards are looked up beside
  the index. Returns one map of name to tensor.
  """
  @spec read_sharded!(Path.t(), keyword()) :: %{String.t() => Nx.Tensor.t()}
  def read_sharded!(path, opts \\ []) do
    index =
      if File.dir?(path), do: Path.join(path, "model.safetensors.index.json"), else: path

    dir = Path.dirname(index)

    index
    |> Native.safetensors_index()
    |> Enum.map(fn {tensor, file} ->
      # Shards sit beside the index: a name with a directory in it (say
      # "../x") is refused rather than followed.
      if Path.basename(file) != file or file in [".", ".."] do
        raise ArgumentError,
              "safetensors index #{index}: shard #{inspect(file)} of #{inspect(tensor)} " <>
                "is not a file name beside the index"
      end

      {tensor, file}
    end)
    |> Enum.group_by(fn {_tensor, file} -> file end, fn {tensor, _file} -> tensor end)
    |> Enum.reduce(%{}, fn {file, names}, acc ->
      Map.merge(acc, read!(Path.join(dir, file), Keyword.put(opts, :only, names)))
    end)
  end

  @doc "The `__metadata__` string map of the file at `path` (empty when absent)."
  @spec metadata!(Path.t()) :: %{String.t() => String.t()}
  def metadata!(path) do
    {_tensors, metadata} = path |> Native.safetensors_open() |> Native.safetensors_info()
    Map.new(metadata)
  end

  @doc """
  Describes the tensors of the file at `path` without reading them:
  `[%{name, dtype, type, shape}]` in header order, where `dtype` is the
  file's spelling (`"F8_E4M3"`) and `type` the Nx type `read!/2` gives it,
  or `nil` when it cannot be read.
  """
  @spec info!(Path.t()) :: [map()]
  def info!(path) do
    {tensors, _metadata} = path |> Native.safetensors_open() |> Native.safetensors_info()

    for {name, dtype_name, type, shape} <- tensors do
      type =
        case type do
          {:pred, 8} -> {:u, 8}
          nil -> @f8[dtype_name]
          type -> type
        end

      %{name: name, dtype: dtype_name, type: type, shape: List.to_tuple(shape)}
    end
  end

  @doc """
  Writes `tensors` (a map of name to tensor, on any backend) and string
  `metadata` to `path`. The file is complete or absent: it is written under
  a temporary name and renamed.
  """
  @spec write!(Path.t(), %{String.t() => Nx.Tensor.t()}, %{String.t() => String.t()}) :: :ok
  def write!(path, tensors, metadata \\ %{}) when is_map(tensors) and is_map(metadata) do
    entries =
      for {name, tensor} <- tensors do
        tensor = Nx.to_tensor(tensor)

        if tensor.type in [{:f, 8}, {:f8_e4m3fn, 8}] do
          raise ArgumentError,
                "safetensors: write! of #{inspect(name)}: 8-bit float tensors are not supported"
        end

        {to_string(name), Emily.Backend.Util.ref(tensor)}
      end

    metadata = for {k, v} <- metadata, do: {to_string(k), to_string(v)}
    Native.safetensors_save(path, entries, metadata)
  end

  @doc false
  # An engine array as a tensor on Emily.Backend (pred reads as u8, as Nx
  # has no boolean type).
  def wrap(ref) do
    ref =
      case Native.dtype(ref) do
        {:pred, 8} -> Native.bitcast(ref, {:u, 8})
        _ -> ref
      end

    shape = List.to_tuple(Native.shape(ref))

    %Nx.Tensor{
      data: %Emily.Backend{ref: ref},
      shape: shape,
      type: Native.dtype(ref),
      names: List.duplicate(nil, tuple_size(shape))
    }
  end
end
