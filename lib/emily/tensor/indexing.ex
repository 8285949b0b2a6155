defmodule Emily.Tensor.Indexing do
  @moduledoc """
  Gather and scatter with Nx's semantics: `gather/3`, `take/3`,
  `take_along_axis/3`, `indexed_add/4`, `indexed_put/4`, and `top_k/2`.

  Indices may have any integer type. Out-of-range indices are clamped into
  range by the engine (never a wild read or write); compile with
  `config :emily, debug_bounds_check: true` to raise on them instead (see
  `Emily`).
  """

  alias Emily.Tensor.{Core, Type}

  @doc """
  Gathers entries of `tensor` at `indices`, whose last dimension addresses
  the given `:axes` (by default the leading ones). The result has shape
  `indices.shape[:-1]` followed by the axes that were not indexed.

  ## Examples

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.gather(t, Emily.Tensor.tensor([[1, 1], [0, 1], [1, 0]]))
      #Emily.Tensor<
        s32[3]
        [4, 2, 3]
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.gather(t, Emily.Tensor.tensor([[2], [0]]), axes: [1])
      #Emily.Tensor<
        s32[2][2]
        [
          [3, 6],
          [1, 4]
        ]
      >
  """
  def gather(tensor, indices, opts \\ []) do
    opts = Core.options!(opts, axes: nil)
    t = Core.to_tensor(tensor)
    idx = integer_indices!(indices, "gather")
    rank = tuple_size(t.shape)

    k =
      case idx.shape do
        {} -> raise ArgumentError, "gather: indices must have rank >= 1, got a scalar"
        shape -> elem(shape, tuple_size(shape) - 1)
      end

    axes = index_axes!(opts[:axes], k, rank, "gather")
    Core.wrap(Emily.gather(t.ref, idx.ref, axes))
  end

  @doc """
  Takes entries along `:axis` (default 0); that axis is replaced by the
  shape of `indices`.

  ## Examples

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.take(t, Emily.Tensor.tensor([1, 0, 1]))
      #Emily.Tensor<
        s32[3][2]
        [
          [3, 4],
          [1, 2],
          [3, 4]
        ]
      >

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.take(t, Emily.Tensor.tensor([[1, 0], [0, 0]]), axis: 1)
      #Emily.Tensor<
        s32[2][2][2]
        [
          [
            [2, 1],
            [1, 1]
          ],
          [
            [4, 3],
            [3, 3]
          ]
        ]
      >
  """
  def take(tensor, indices, opts \\ []) do
    opts = Core.options!(opts, axis: 0)
    t = Core.to_tensor(tensor)
    idx = integer_indices!(indices, "take")
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    Core.wrap(Emily.take(t.ref, idx.ref, axis))
  end

  @doc """
  Takes entries along `:axis` (default 0) at `indices`, which has the
  tensor's rank and broadcasts with it on the other axes.

  ## Examples

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.take_along_axis(t, Emily.Tensor.tensor([[0, 0, 2, 2, 1, 1], [2, 2, 1, 1, 0, 0]]), axis: 1)
      #Emily.Tensor<
        s32[2][6]
        [
          [1, 1, 3, 3, 2, 2],
          [6, 6, 5, 5, 4, 4]
        ]
      >
  """
  def take_along_axis(tensor, indices, opts \\ []) do
    opts = Core.options!(opts, axis: 0)
    t = Core.to_tensor(tensor)
    idx = integer_indices!(indices, "take_along_axis")
    rank = tuple_size(t.shape)
    axis = Core.axis!(opts[:axis], rank)

    if tuple_size(idx.shape) != rank do
      raise ArgumentError,
            "take_along_axis: indices must have the tensor's rank #{rank}, got shape #{inspect(idx.shape)}"
    end

    Core.wrap(Emily.take_along_axis(t.ref, idx.ref, axis))
  end

  @doc """
  Adds `updates` into a copy of `tensor` at `indices` (`{n, k}`, or `{k}`
  for one update) addressing `:axes` (default the leading k). Duplicate
  indices accumulate. The type merges the tensor's and the updates'.

  ## Examples

      iex> t = Emily.Tensor.iota({1, 2, 3})
      iex> Emily.Tensor.indexed_add(t, Emily.Tensor.tensor([[0, 0, 0], [0, 1, 1], [0, 0, 0], [0, 0, 2]]), Emily.Tensor.tensor([1, 3, 1, -2]))
      #Emily.Tensor<
        s32[1][2][3]
        [
          [
            [2, 1, 0],
            [3, 7, 5]
          ]
        ]
      >
  """
  def indexed_add(tensor, indices, updates, opts \\ []),
    do: indexed(:indexed_add, tensor, indices, updates, opts)

  @doc """
  Writes `updates` into a copy of `tensor` at `indices`, as
  `indexed_add/4` (the last of duplicate indices wins).

  ## Examples

      iex> Emily.Tensor.indexed_put(Emily.Tensor.tensor([0, 0, 0]), Emily.Tensor.tensor([[1], [2]]), Emily.Tensor.tensor([2, 4]))
      #Emily.Tensor<
        s32[3]
        [0, 2, 4]
      >
  """
  def indexed_put(tensor, indices, updates, opts \\ []),
    do: indexed(:indexed_put, tensor, indices, updates, opts)

  defp indexed(op, tensor, indices, updates, opts) do
    opts = Core.options!(opts, axes: nil)
    t = Core.to_tensor(tensor)
    u = Core.to_tensor(updates)
    idx = integer_indices!(indices, Atom.to_string(op))
    type = Type.merge(t.type, u.type)
    rank = tuple_size(t.shape)

    {idx, u} =
      case idx.shape do
        {_k} ->
          {Emily.Tensor.new_axis(idx, 0), Emily.Tensor.new_axis(u, 0)}

        {_n, _k} ->
          {idx, u}

        shape ->
          raise ArgumentError,
                "#{op}: indices must have shape {n, k} or {k}, got #{inspect(shape)}"
      end

    k = elem(idx.shape, 1)
    axes = index_axes!(opts[:axes], k, rank, Atom.to_string(op))
    t = Core.cast(t, type)
    u = Core.cast(u, type)
    Core.wrap(apply(Emily, op, [t.ref, idx.ref, u.ref, axes]))
  end

  @doc """
  The `:k` (default 1) largest entries along the last axis, in descending
  order, and their indices (s32). NaN counts as the largest value.

  ## Examples

      iex> {values, indices} = Emily.Tensor.top_k(Emily.Tensor.tensor([1, 3, 2, 3]), k: 2)
      iex> {Emily.Tensor.to_list(values), Emily.Tensor.to_list(indices)}
      {[3, 3], [1, 3]}
  """
  def top_k(tensor, opts \\ []) do
    opts = Core.options!(opts, k: 1)
    t = Core.to_tensor(tensor)
    rank = tuple_size(t.shape)
    k = opts[:k]

    cond do
      rank == 0 ->
        raise ArgumentError, "top_k: expected a tensor of rank >= 1, got a scalar"

      not is_integer(k) or k < 1 or k > elem(t.shape, rank - 1) ->
        raise ArgumentError,
              "top_k: :k must be an integer in 1..#{elem(t.shape, rank - 1)}, got #{inspect(k)}"

      true ->
        :ok
    end

    order = Emily.Tensor.argsort(t, axis: rank - 1, direction: :desc)
    indices = Emily.Tensor.slice_along_axis(order, 0, k, axis: rank - 1)
    {take_along_axis(t, indices, axis: rank - 1), indices}
  end

  defp integer_indices!(indices, op) do
    idx = Core.to_tensor(indices)

    unless Type.integer?(idx.type) do
      raise ArgumentError,
            "#{op}: indices must be an integer tensor, got #{Type.to_string(idx.type)}"
    end

    idx
  end

  defp index_axes!(nil, k, rank, op) do
    if k > rank do
      raise ArgumentError,
            "#{op}: indices address #{k} axes but the tensor has rank #{rank}"
    end

    Enum.to_list(0..(k - 1)//1)
  end

  defp index_axes!(axes, k, rank, op) when is_list(axes) do
    if length(axes) != k do
      raise ArgumentError,
            "#{op}: :axes #{inspect(axes)} must have one axis per index column (#{k})"
    end

    Core.axes!(axes, rank)
  end
end
