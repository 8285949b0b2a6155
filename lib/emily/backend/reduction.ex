defmodule Emily.Backend.Reduction do
  @moduledoc false
  # Reductions of Emily.Backend on the engine's reduce ops, argmax/argmin
  # (Nx's tie-break and NaN rules are the engine's), dot, and Nx.reduce/5
  # with a user function.

  alias Emily.Backend.Util
  alias Emily.Native

  # Nx's callback => the engine's reduce op. sum and product run in the
  # output type (Nx widens small integers); max/min keep the input's.
  @reductions [sum: :sum, product: :product, reduce_max: :max, reduce_min: :min]

  for {callback, engine_op} <- @reductions do
    def unquote(callback)(out, tensor, opts) do
      ref = Native.unquote(engine_op)(Util.ref_as(tensor, out.type), opts[:axes], opts[:keep_axes] || false)
      Util.wrap(out, ref, [tensor])
    end
  end

  # all/any accept every type and give the engine's pred (u8 in Nx).
  for op <- [:all, :any] do
    def unquote(op)(out, tensor, opts) do
      ref = Native.unquote(op)(Util.ref(tensor), opts[:axes], opts[:keep_axes] || false)
      Util.wrap(out, ref, [tensor])
    end
  end

  for op <- [:argmax, :argmin] do
    def unquote(op)(out, tensor, opts) do
      tie_high = opts[:tie_break] == :high
      ref = Native.unquote(op)(Util.ref(tensor), opts[:axis], opts[:keep_axis] || false, tie_high, out.type)
      Util.wrap(out, ref, [tensor])
    end
  end

  @doc "`Nx.dot/6` in the output type: batch axes, then left free, then right free."
  def dot(out, left, contract_left, batch_left, right, contract_right, batch_right) do
    [l, r] = Util.refs([left, right])
    type = out.type
    ref = Native.dot(Util.cast(l, type), Util.cast(r, type), contract_left, contract_right, batch_left, batch_right)
    # Scanned for NaN/Inf when Emily is compiled with :debug_detect_nan_inf.
    Util.wrap(out, Emily.check_finite(:dot, ref), [left, right])
  end

  @doc """
  `Nx.reduce/4` with a user function. The reduced axes are moved last and
  flattened, then `fun` folds the columns one by one, each step on a whole
  vector of accumulators (reduce functions are elementwise, so this gives
  what a scalar fold would, in as many engine ops as the reduced size).
  """
  def reduce(out, tensor, acc, opts, fun) do
    rank = tuple_size(tensor.shape)
    axes = opts[:axes] || Enum.to_list(0..(rank - 1)//1)
    kept = Enum.to_list(0..(rank - 1)//1) -- axes
    dims = Util.dims(tensor.shape)
    kept_dims = Enum.map(kept, &Enum.at(dims, &1))
    reduced_size = Enum.reduce(axes, 1, &(Enum.at(dims, &1) * &2))

    columns =
      tensor
      |> Nx.transpose(axes: kept ++ axes)
      |> Nx.reshape(List.to_tuple(kept_dims ++ [reduced_size]))

    start = Nx.broadcast(Nx.as_type(acc, out.type), List.to_tuple(kept_dims))

    result =
      Enum.reduce(0..(reduced_size - 1)//1, start, fn i, acc ->
        column = Nx.slice_along_axis(columns, i, 1, axis: length(kept_dims)) |> Nx.squeeze(axes: [length(kept_dims)])
        fun.(column, acc) |> Nx.as_type(out.type)
      end)

    result =
      if opts[:keep_axes] do
        Nx.reshape(result, out.shape)
      else
        result
      end

    Util.wrap(out, Util.ref(result), [tensor])
  end
end
