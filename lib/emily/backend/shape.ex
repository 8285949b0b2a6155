defmodule Emily.Backend.Shape do
  @moduledoc false
  # Shape callbacks of Emily.Backend: views where the engine makes them
  # (reshape, transpose, broadcast, squeeze, slice, reverse) and copies
  # otherwise (pad, put_slice, concatenate). Nx has validated the axes and
  # computed the output shape; integer slice starts arrive already clamped.

  alias Emily.Backend.Util
  alias Emily.Native

  def reshape(out, tensor), do: Util.wrap(out, Native.reshape(Util.ref(tensor), Util.dims(out.shape)), [tensor])

  def squeeze(out, tensor, _axes), do: reshape(out, tensor)

  def transpose(out, tensor, axes), do: Util.wrap(out, Native.transpose(Util.ref(tensor), axes), [tensor])

  def reverse(out, tensor, []), do: Util.wrap(out, Util.ref(tensor), [tensor])
  def reverse(out, tensor, axes), do: Util.wrap(out, Native.reverse(Util.ref(tensor), axes), [tensor])

  @doc """
  `Nx.broadcast/3`: the input's axis i becomes the output's axis
  `axes[i]`; the others are new (size 1, then broadcast).
  """
  def broadcast(out, tensor, shape, axes) do
    in_dims = Util.dims(tensor.shape)
    by_axis = Map.new(Enum.zip(axes, in_dims))
    aligned = for i <- 0..(tuple_size(shape) - 1)//1, do: Map.get(by_axis, i, 1)
    ref = Util.ref(tensor)
    ref = if aligned == in_dims, do: ref, else: Native.reshape(ref, aligned)
    Util.wrap(out, Native.broadcast_to(ref, Util.dims(shape)), [tensor])
  end

  @doc "`Nx.pad/3`: low/high (negative crops) and interior padding."
  def pad(out, tensor, pad_value, config) do
    [t, v] = Util.refs([tensor, pad_value])
    {low, high, interior} = unzip3(config)
    type = out.type
    Util.wrap(out, Native.pad(Util.cast(t, type), Util.cast(v, type), low, high, interior), [tensor])
  end

  @doc """
  `Nx.slice/4`: integer starts (already clamped by Nx) make a strided view;
  tensor starts a dynamic slice that the engine clamps at evaluation.
  """
  def slice(out, tensor, starts, lengths, strides) do
    ref = Util.ref(tensor)

    ref =
      if Enum.all?(starts, &is_integer/1) do
        # Nx clamps start indices so the slice fits, as for dynamic starts.
        starts =
          Enum.zip_with([starts, lengths, Util.dims(tensor.shape)], fn [st, len, d] ->
            st |> max(0) |> min(d - len)
          end)

        stops = Enum.zip_with(starts, lengths, &(&1 + &2))
        Native.slice(ref, starts, stops, strides)
      else
        Native.dynamic_slice(ref, starts_ref(starts, ref), lengths, strides)
      end

    Util.wrap(out, ref, [tensor])
  end

  @doc "`Nx.put_slice/3` in the output type, starts clamped so the slice fits."
  def put_slice(out, tensor, starts, slice) do
    [t, s] = Util.refs([tensor, slice])
    type = out.type
    t = Util.cast(t, type)
    s = Util.cast(s, type)

    ref =
      if Enum.all?(starts, &is_integer/1) do
        clamped =
          Enum.zip_with([starts, Util.dims(slice.shape), Util.dims(tensor.shape)], fn [st, sd, d] ->
            st |> max(0) |> min(d - sd)
          end)

        Native.put_slice(t, clamped, s)
      else
        Native.dynamic_put_slice(t, starts_ref(starts, t), s)
      end

    Util.wrap(out, ref, [tensor, slice])
  end

  def concatenate(out, tensors, axis) do
    refs = tensors |> Util.refs() |> Enum.map(&Util.cast(&1, out.type))
    Util.wrap(out, Native.concatenate(refs, axis), tensors)
  end

  def stack(out, tensors, axis) do
    refs =
      tensors
      |> Util.refs()
      |> Enum.map(&(&1 |> Util.cast(out.type) |> Native.expand_dims(axis)))

    Util.wrap(out, Native.concatenate(refs, axis), tensors)
  end

  @doc "`Nx.as_type/2`: value conversion (floats to integers truncate, NaN to 0)."
  def as_type(out, tensor) do
    Util.engine_type!(out.type, :as_type)
    Util.wrap(out, Util.ref_as(tensor, out.type), [tensor])
  end

  @doc "`Nx.bitcast/2`: the same bytes read as another type of the same width."
  def bitcast(out, tensor) do
    # Through the bytes Nx sees: an 8-bit float's are not its engine f16's.
    bytes = Util.to_storage(Util.ref(tensor), tensor.type)
    ref = bytes |> Native.bitcast(Util.storage_type(out.type, :bitcast)) |> Util.from_storage(out.type)
    Util.wrap(out, ref, [tensor])
  end

  # A 1-D s64 engine tensor holding the starts (integers and scalar
  # tensors), on the device of `like` (the sliced tensor's ref): the
  # integers' pieces are made on the CPU and must join the others there.
  defp starts_ref(starts, like) do
    starts
    |> Enum.map(fn
      s when is_integer(s) -> Native.from_binary(<<s::signed-64-native>>, [1], {:s, 64}) |> Util.on_device_of(like)
      %Nx.Tensor{} = t -> t |> Util.ref() |> Native.as_type({:s, 64}) |> Native.reshape([1])
    end)
    |> Native.concatenate(0)
  end

  defp unzip3(triples) do
    {Enum.map(triples, &elem(&1, 0)), Enum.map(triples, &elem(&1, 1)), Enum.map(triples, &elem(&1, 2))}
  end
end
