defmodule Emily.Backend.Indexing do
  @moduledoc false
  # Indexing and sorting callbacks of Emily.Backend: gather, indexed
  # add/put, take, take_along_axis, sort, argsort and top_k. They go
  # through Emily's checked entry points, so the :debug_bounds_check flag
  # (see `Emily`) covers them.

  alias Emily.Backend.Util
  alias Emily.Native

  def gather(out, tensor, indices, opts) do
    [t, i] = Util.refs([tensor, indices])
    Util.wrap(out, Emily.gather(t, i, opts[:axes]), [tensor])
  end

  def indexed_add(out, tensor, indices, updates, opts) do
    [t, i, u] = Util.refs([tensor, indices, updates])
    ref = Emily.indexed_add(Util.cast(t, out.type), i, Util.cast(u, out.type), opts[:axes])
    Util.wrap(out, ref, [tensor, updates])
  end

  def indexed_put(out, tensor, indices, updates, opts) do
    [t, i, u] = Util.refs([tensor, indices, updates])
    ref = Emily.indexed_put(Util.cast(t, out.type), i, Util.cast(u, out.type), opts[:axes])
    Util.wrap(out, ref, [tensor, updates])
  end

  @doc "`Nx.take/3` (block): the engine's take along the block's axis."
  def take(out, tensor, indices, axis) do
    [t, i] = Util.refs([tensor, indices])
    Util.wrap(out, Emily.take(t, i, axis), [tensor])
  end

  @doc "`Nx.take_along_axis/3` (block)."
  def take_along_axis(out, tensor, indices, axis) do
    [t, i] = Util.refs([tensor, indices])
    Util.wrap(out, Emily.take_along_axis(t, i, axis), [tensor])
  end

  @doc "Stable sort; NaN sorts as the largest value, as in Nx."
  def sort(out, tensor, opts) do
    ref = Native.sort(Util.ref(tensor), opts[:axis], opts[:direction] == :desc)
    Util.wrap(out, ref, [tensor])
  end

  def argsort(out, tensor, opts) do
    ref = Native.argsort(Util.ref(tensor), opts[:axis], opts[:direction] == :desc, out.type)
    Util.wrap(out, ref, [tensor])
  end

  @doc """
  `Nx.top_k/2` (block): a stable descending argsort of the last axis, the
  first `k` indices, and the values they pick (ties keep the lower index,
  as Nx's composition).
  """
  def top_k({out_values, out_indices}, tensor, k) do
    ref = Util.ref(tensor)
    rank = tuple_size(tensor.shape)
    axis = rank - 1
    order = Native.argsort(ref, axis, true, {:s, 64})
    dims = Util.dims(tensor.shape)
    stops = List.replace_at(dims, axis, k)
    starts = List.duplicate(0, rank)
    strides = List.duplicate(1, rank)
    top = Native.slice(order, starts, stops, strides)
    values = Emily.take_along_axis(ref, top, axis)
    {Util.wrap(out_values, values, [tensor]), Util.wrap(out_indices, top, [tensor])}
  end
end
