defmodule Emily.Tensor.Cumulative do
  @moduledoc """
  Cumulative (scan) operations along one axis, as `Nx.cumulative_sum/2`,
  `Nx.cumulative_product/2`, `Nx.cumulative_max/2` and
  `Nx.cumulative_min/2`, and the discrete difference `diff/2` (as
  `Nx.diff/2`).

  Each takes `:axis` (default `0`) and `:reverse` (default `false`), keeps
  the input's shape and type (integers wrap on overflow; no promotion to the
  aggregate type as `sum/2` does), and runs as one engine scan primitive.
  `cumulative_max/2` and `cumulative_min/2` reject complex tensors; a NaN
  propagates to every later position of its lane.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @doc """
  Returns the cumulative sum of elements along an axis.

  ## Options

    * `:axis` - the axis to sum elements along. Defaults to `0`
    * `:reverse` - whether to perform accumulation in the opposite direction. Defaults to `false`

  ## Examples

      iex> Emily.Tensor.cumulative_sum(Emily.Tensor.tensor([1, 2, 3, 4]))
      #Emily.Tensor<
        s32[4]
        [1, 3, 6, 10]
      >

      iex> Emily.Tensor.cumulative_sum(Emily.Tensor.iota({3, 3}), axis: 1)
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 1, 3],
          [3, 7, 12],
          [6, 13, 21]
        ]
      >

      iex> Emily.Tensor.cumulative_sum(Emily.Tensor.iota({3, 3}), axis: 0, reverse: true)
      #Emily.Tensor<
        s32[3][3]
        [
          [9, 12, 15],
          [9, 11, 13],
          [6, 7, 8]
        ]
      >
  """
  def cumulative_sum(tensor, opts \\ []), do: scan(tensor, :sum, :cumulative_sum, opts)

  @doc """
  Returns the cumulative product of elements along an axis.

  ## Options

    * `:axis` - the axis to multiply elements along. Defaults to `0`
    * `:reverse` - whether to perform accumulation in the opposite direction. Defaults to `false`

  ## Examples

      iex> Emily.Tensor.cumulative_product(Emily.Tensor.tensor([1, 2, 3, 4]))
      #Emily.Tensor<
        s32[4]
        [1, 2, 6, 24]
      >

      iex> Emily.Tensor.cumulative_product(Emily.Tensor.iota({3, 3}), axis: 1, reverse: true)
      #Emily.Tensor<
        s32[3][3]
        [
          [0, 2, 2],
          [60, 20, 5],
          [336, 56, 8]
        ]
      >
  """
  def cumulative_product(tensor, opts \\ []),
    do: scan(tensor, :product, :cumulative_product, opts)

  @doc """
  Returns the cumulative maximum of elements along an axis.

  ## Options

    * `:axis` - the axis to compare elements along. Defaults to `0`
    * `:reverse` - whether to perform accumulation in the opposite direction. Defaults to `false`

  ## Examples

      iex> Emily.Tensor.cumulative_max(Emily.Tensor.tensor([3, 4, 2, 1]))
      #Emily.Tensor<
        s32[4]
        [3, 4, 4, 4]
      >

      iex> Emily.Tensor.cumulative_max(Emily.Tensor.tensor([[2, 3, 1], [1, 3, 2], [2, 1, 3]]), axis: 1, reverse: true)
      #Emily.Tensor<
        s32[3][3]
        [
          [3, 3, 1],
          [3, 3, 2],
          [3, 3, 3]
        ]
      >
  """
  def cumulative_max(tensor, opts \\ []), do: scan(tensor, :max, :cumulative_max, opts)

  @doc """
  Returns the cumulative minimum of elements along an axis.

  ## Options

    * `:axis` - the axis to compare elements along. Defaults to `0`
    * `:reverse` - whether to perform accumulation in the opposite direction. Defaults to `false`

  ## Examples

      iex> Emily.Tensor.cumulative_min(Emily.Tensor.tensor([3, 4, 2, 1]))
      #Emily.Tensor<
        s32[4]
        [3, 3, 2, 1]
      >

      iex> Emily.Tensor.cumulative_min(Emily.Tensor.tensor([[2, 3, 1], [1, 3, 2], [2, 1, 3]]), axis: 0)
      #Emily.Tensor<
        s32[3][3]
        [
          [2, 3, 1],
          [1, 3, 1],
          [1, 1, 1]
        ]
      >
  """
  def cumulative_min(tensor, opts \\ []), do: scan(tensor, :min, :cumulative_min, opts)

  @doc """
  Calculates the n-th discrete difference along the given axis.

  The first difference is `out[i] = a[i + 1] - a[i]` along `:axis`; higher
  orders apply it again. The type is kept (integers wrap, as `subtract/2`),
  and the axis shrinks by `:order`.

  ## Options

    * `:order` - the number of times to take the difference. Defaults to `1`
    * `:axis` - the axis to take the difference along. Defaults to `-1`

  ## Examples

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([1, 2, 4, 7, 0]))
      #Emily.Tensor<
        s32[4]
        [1, 2, 3, -7]
      >

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([1, 2, 4, 7, 0]), order: 2)
      #Emily.Tensor<
        s32[3]
        [1, 1, -10]
      >

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([[1, 3, 6, 10], [0, 5, 6, 8]]))
      #Emily.Tensor<
        s32[2][3]
        [
          [2, 3, 4],
          [5, 1, 2]
        ]
      >

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([[1, 3, 6, 10], [0, 5, 6, 8]]), axis: 0)
      #Emily.Tensor<
        s32[1][4]
        [
          [-1, 2, 0, -2]
        ]
      >

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([1, 2, 4, 7, 0]), order: 0)
      #Emily.Tensor<
        s32[5]
        [1, 2, 4, 7, 0]
      >

      iex> Emily.Tensor.diff(Emily.Tensor.tensor([1, 2, 4, 7, 0]), order: -1)
      ** (ArgumentError) order must be non-negative but got: -1
  """
  def diff(tensor, opts \\ []) do
    opts = Core.options!(opts, order: 1, axis: -1)
    t = Core.to_tensor(tensor)
    rank = tuple_size(t.shape)

    if rank == 0 do
      raise ArgumentError, "cannot compute diff of a scalar"
    end

    order = opts[:order]

    unless is_integer(order) do
      raise ArgumentError, "expected :order to be an integer, got: #{inspect(order)}"
    end

    if order < 0 do
      raise ArgumentError, "order must be non-negative but got: #{inspect(order)}"
    end

    axis = Core.axis!(opts[:axis], rank)
    size = elem(t.shape, axis)

    if order > size do
      raise ArgumentError,
            "order (#{order}) must not exceed the size of axis #{axis} (#{size})"
    end

    Enum.reduce(0..(order - 1)//1, t, fn k, acc ->
      len = size - k - 1

      Emily.Tensor.subtract(
        Emily.Tensor.slice_along_axis(acc, 1, len, axis: axis),
        Emily.Tensor.slice_along_axis(acc, 0, len, axis: axis)
      )
    end)
  end

  defp scan(tensor, op, name, opts) do
    opts = Core.options!(opts, axis: 0, reverse: false)
    t = Core.to_tensor(tensor)

    if op in [:max, :min] and Type.complex?(t.type) do
      raise ArgumentError, "#{name}/2 is not supported for complex inputs"
    end

    reverse = opts[:reverse]

    unless is_boolean(reverse) do
      raise ArgumentError, "expected :reverse to be a boolean, got: #{inspect(reverse)}"
    end

    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    Core.wrap(Native.scan(t.ref, op, axis, reverse))
  end
end
