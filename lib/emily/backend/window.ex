defmodule Emily.Backend.Window do
  @moduledoc false
  # Window callbacks of Emily.Backend (the engine's window_reduce and
  # window_scatter kernels), Nx.window_reduce/5 with a user function, and
  # the cumulative blocks (the engine's scan).

  alias Emily.Backend.Util
  alias Emily.Native

  @window_ops [window_sum: :sum, window_product: :product, window_max: :max, window_min: :min]

  for {callback, engine_op} <- @window_ops do
    def unquote(callback)(out, tensor, window, opts) do
      {low, high} = Enum.unzip(opts[:padding])

      ref =
        Native.window_reduce(
          Util.ref_as(tensor, out.type),
          unquote(engine_op),
          Util.dims(window),
          opts[:strides],
          low,
          high,
          opts[:window_dilations]
        )

      Util.wrap(out, ref, [tensor])
    end
  end

  @doc """
  `Nx.window_reduce/5` with a user function: the tensor is padded with
  the accumulator, then `fun` folds one strided slice per position inside
  the window (each slice holds that position of every window), so it runs
  as many times as the window has elements, on whole tensors.
  """
  def window_reduce(out, tensor, acc, window, opts, fun) do
    window = Util.dims(window)
    strides = opts[:strides]
    dilations = opts[:window_dilations]
    padding = Enum.map(opts[:padding], fn {lo, hi} -> {lo, hi, 0} end)
    padded = Nx.pad(tensor, Nx.as_type(acc, tensor.type), padding)
    out_dims = Util.dims(out.shape)

    positions =
      Enum.reduce(Enum.reverse(window), [[]], fn size, tails ->
        for i <- 0..(size - 1)//1, tail <- tails, do: [i | tail]
      end)

    start = Nx.broadcast(Nx.as_type(acc, out.type), out.shape)

    result =
      Enum.reduce(positions, start, fn position, acc ->
        starts = Enum.zip_with(position, dilations, &(&1 * &2))
        lengths = Enum.zip_with(out_dims, strides, fn n, s -> max((n - 1) * s + 1, 0) end)
        slice = Nx.slice(padded, starts, lengths, strides: strides)
        fun.(slice, acc) |> Nx.as_type(out.type)
      end)

    Util.wrap(out, Util.ref(result), [tensor])
  end

  for {callback, select_max} <- [window_scatter_max: true, window_scatter_min: false] do
    def unquote(callback)(out, tensor, source, init_value, window, opts) do
      [t, s, init] = Util.refs([tensor, source, init_value])
      {low, high} = Enum.unzip(opts[:padding])

      ref =
        Native.window_scatter(
          t,
          Util.cast(s, out.type),
          Util.cast(init, out.type),
          unquote(select_max),
          Util.dims(window),
          opts[:strides],
          low,
          high
        )

      Util.wrap(out, ref, [tensor, source])
    end
  end

  @doc "The cumulative blocks: the engine's scan along the block's axis."
  def cumulative(out, tensor, op, axis, reverse) do
    Util.wrap(out, Native.scan(Util.ref_as(tensor, out.type), op, axis, reverse), [tensor])
  end
end
