defmodule Emily.Fast.Block do
  @moduledoc false
  # The Nx.block/4 structs of Emily.Fast. Each module implements
  # Emily.Block: under Emily.Backend and Emily.Compiler the block runs one
  # engine kernel (include/emily_fast.h); elsewhere Nx runs the composed
  # fallback that Emily.Fast passed with it.

  alias Emily.Backend.Util

  @native_types [{:f, 16}, {:bf, 16}, {:f, 32}, {:f, 64}]

  @doc false
  # The refs of `tensors` (nil stays nil) in the output's type, or
  # :fallback for output types the kernels do not take (f8).
  def refs(%{type: type}, tensors) when type in @native_types do
    present = Enum.reject(tensors, &is_nil/1)
    refs = present |> Util.refs() |> Enum.map(&Util.cast(&1, type))

    {refs, _} =
      Enum.map_reduce(tensors, refs, fn
        nil, refs -> {nil, refs}
        _, [ref | refs] -> {ref, refs}
      end)

    refs
  end

  def refs(_out, _tensors), do: :fallback

  @doc false
  # RoPE's offset (a scalar integer tensor) as an s32/s64 ref beside x.
  def offset_ref(%Nx.Tensor{type: type} = offset, x_ref) do
    ref = Util.ref(offset)
    ref = if type == {:s, 64}, do: ref, else: Util.cast(ref, {:s, 32})
    Util.on_device_of(ref, x_ref)
  end

  @doc false
  # The optional inputs of a block, in order: each true flag takes the
  # next of `inputs`, each false one stands for nil.
  def optional(inputs, flags) do
    {taken, []} =
      Enum.map_reduce(flags, inputs, fn
        true, [t | rest] -> {t, rest}
        false, rest -> {nil, rest}
      end)

    taken
  end

  @doc false
  def wrap(out, ref, inputs, op) do
    Util.wrap(out, Emily.check_finite(op, ref), inputs)
  end
end

defmodule Emily.Fast.Block.RMSNorm do
  @moduledoc false
  @behaviour Emily.Block
  defstruct eps: 1.0e-6, weight?: true

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{eps: eps, weight?: weight?}, out, [x | rest]) do
    w = if weight?, do: hd(rest)

    case Block.refs(out, [x, w]) do
      :fallback -> :fallback
      [xr, wr] -> Block.wrap(out, Emily.Native.fast_rms_norm(xr, wr, eps), [x], :fast_rms_norm)
    end
  end
end

defmodule Emily.Fast.Block.LayerNorm do
  @moduledoc false
  @behaviour Emily.Block
  defstruct eps: 1.0e-5, weight?: true, bias?: true

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{eps: eps, weight?: weight?, bias?: bias?}, out, [x | rest]) do
    {w, rest} = if weight?, do: {hd(rest), tl(rest)}, else: {nil, rest}
    b = if bias?, do: hd(rest)

    case Block.refs(out, [x, w, b]) do
      :fallback ->
        :fallback

      [xr, wr, br] ->
        Block.wrap(out, Emily.Native.fast_layer_norm(xr, wr, br, eps), [x], :fast_layer_norm)
    end
  end
end

defmodule Emily.Fast.Block.Softmax do
  @moduledoc false
  @behaviour Emily.Block
  defstruct axis: -1

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{axis: axis}, out, [x]) do
    case Block.refs(out, [x]) do
      :fallback -> :fallback
      [xr] -> Block.wrap(out, Emily.Native.fast_softmax(xr, axis), [x], :fast_softmax)
    end
  end
end

defmodule Emily.Fast.Block.RoPE do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:dims, traditional: false, base: 10_000.0, scale: 1.0]

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{} = s, out, [x, offset]) do
    case Block.refs(out, [x]) do
      :fallback ->
        :fallback

      [xr] ->
        ref =
          Emily.Native.fast_rope(
            xr,
            Block.offset_ref(offset, xr),
            nil,
            s.dims,
            s.traditional,
            s.base,
            s.scale
          )

        Block.wrap(out, ref, [x], :fast_rope)
    end
  end
end

defmodule Emily.Fast.Block.RoPEWithFreqs do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:dims, traditional: false, scale: 1.0]

  alias Emily.Fast.Block

  @impl true
  def emily_block(%__MODULE__{} = s, out, [x, offset, freqs]) do
    case Block.refs(out, [x]) do
      :fallback ->
        :fallback

      [xr] ->
        freqs_ref = freqs |> Emily.Backend.Util.ref() |> Emily.Backend.Util.cast({:f, 32})
        freqs_ref = Emily.Backend.Util.on_device_of(freqs_ref, xr)
        offset_ref = Block.offset_ref(offset, xr)

        ref =
          Emily.Native.fast_rope(xr, offset_ref, freqs_ref, s.dims, s.traditional, 1.0, s.scale)

        Block.wrap(out, ref, [x], :fast_rope)
    end
  end
end
