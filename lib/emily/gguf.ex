defmodule Emily.GGUF do
  @moduledoc """
  Reads GGUF files (versions 2 and 3), the format of llama.cpp and ggml.

  `open!/1` maps the file and checks its whole header: every string and
  array length, count, offset and alignment against the file's size. A
  truncated or hostile file raises `ArgumentError` naming the file, the
  field and the byte offset.

      gguf = Emily.GGUF.open!("model.gguf")
      gguf.metadata["general.architecture"]
      #=> "llama"
      Emily.GGUF.tensor!(gguf, "token_embd.weight")

  Tensors alias the mapped bytes (no copy) and are CPU arrays on
  `Emily.Backend`. Shapes are row-major: GGUF lists dims innermost first,
  and they are reversed here, so a `{rows, cols}` weight is `{rows, cols}`.
  Block-quantized tensors (q4_0 ... q6_k) come back as their raw blocks:
  `{:ggml, type, {rows, cols}, bytes}` where `bytes` is a u8 tensor of
  shape `{rows, cols / block_elems * block_bytes}`.
  """

  alias Emily.Native

  defstruct [:path, :version, :alignment, :data_offset, :metadata, :tensors, :ref]

  @type tensor_info :: %{
          name: String.t(),
          shape: tuple(),
          type: atom(),
          ggml_type: non_neg_integer(),
          offset: non_neg_integer(),
          nbytes: non_neg_integer()
        }
  @type t :: %__MODULE__{
          path: Path.t(),
          version: 2 | 3,
          alignment: pos_integer(),
          data_offset: non_neg_integer(),
          metadata: %{String.t() => term()},
          tensors: [tensor_info()],
          ref: reference()
        }

  # The ggml type names the C reader knows (a closed set: no atoms are
  # made from file contents).
  @type_names ~w(f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2_k q3_k q4_k q5_k q6_k q8_k
                 iq2_xxs iq2_xs iq3_xxs iq1_s iq4_nl iq3_s iq2_s iq4_xs i8 i16 i32 i64
                 f64 iq1_m bf16 tq1_0 tq2_0 mxfp4 unknown)
  @type_atoms Map.new(@type_names, &{&1, String.to_atom(&1)})

  @doc """
  Opens the GGUF file at `path`: its version, alignment, metadata (a map of
  key to value: integers, floats, booleans, binaries, lists for arrays) and
  tensor infos (in file order).
  """
  @spec open!(Path.t()) :: t()
  def open!(path) do
    ref = Native.gguf_open(path)
    info = Native.gguf_info(ref)

    tensors =
      for {name, shape, ggml_type, type_name, offset, nbytes} <- info.tensors do
        %{
          name: name,
          shape: List.to_tuple(shape),
          type: Map.fetch!(@type_atoms, type_name),
          ggml_type: ggml_type,
          offset: offset,
          nbytes: nbytes
        }
      end

    %__MODULE__{
      path: path,
      version: info.version,
      alignment: info.alignment,
      data_offset: info.data_offset,
      metadata: Map.new(info.metadata),
      tensors: tensors,
      ref: ref
    }
  end

  @doc """
  Tensor `name`: an Nx tensor for f32, f16, bf16, f64 and integer types;
  `{:ggml, type, {rows, cols}, bytes}` for block-quantized types, where
  `cols` is the innermost dim, `rows` the product of the others and `bytes`
  a u8 tensor of the raw blocks. `ArgumentError` for an unknown name or a
  type the engine does not read.
  """
  @spec tensor!(t(), String.t()) ::
          Nx.Tensor.t() | {:ggml, atom(), {pos_integer(), pos_integer()}, Nx.Tensor.t()}
  def tensor!(%__MODULE__{ref: ref} = gguf, name) do
    {array, _ggml_type} = Native.gguf_get(ref, name)
    info = Enum.find(gguf.tensors, &(&1.name == name))

    if info.type in [:f32, :f16, :bf16, :f64, :i8, :i16, :i32, :i64] do
      Emily.SafeTensors.wrap(array)
    else
      dims = Tuple.to_list(info.shape)
      cols = List.last(dims) || 1
      rows = dims |> Enum.drop(-1) |> Enum.product()
      {:ggml, info.type, {rows, cols}, Emily.SafeTensors.wrap(array)}
    end
  end

  @doc "Every tensor of the file, as `tensor!/2` gives them: a map of name to result."
  @spec tensors!(t()) :: %{String.t() => term()}
  def tensors!(%__MODULE__{} = gguf) do
    Map.new(gguf.tensors, &{&1.name, tensor!(gguf, &1.name)})
  end
end
