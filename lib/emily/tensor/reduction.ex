defmodule Emily.Tensor.Reduction do
  @moduledoc """
  Reductions and sorting with Nx's semantics: `sum/2`, `product/2`,
  `reduce_max/2`, `reduce_min/2`, `all/2`, `any/2`, `mean/2`,
  `variance/2`, `standard_deviation/2`, `median/2`, `mode/2`,
  `logsumexp/2`, `weighted_mean/3`, `argmax/2`, `argmin/2`,
  `all_close/3`, `sort/2`, `argsort/2`, `covariance/3` and `reduce/4`
  (a user function, run on the host).

  The aggregates take `axes:` (a list of axes, negative ones counted from
  the end; `nil`, the default, reduces every axis) and `keep_axes:`
  (reduced axes stay as size 1). `argmax/2`, `argmin/2`, `median/2` and
  `mode/2` take a single `axis:` and `keep_axis:`. Output types follow Nx:
  sums and products use the aggregate type (u8 sums to u32, s8 to s32, u64
  to s64), `all/2`, `any/2` and `all_close/3` give u8, the means and
  variances are floating point, argmax/argmin/argsort give s32 unless
  `:type` says otherwise.

  Float `reduce_max/2` and `reduce_min/2` propagate NaN; sorting treats NaN
  as the largest value (ascending `[-Inf, 0.0, Inf, NaN]`, descending puts
  NaN first); argmax and argmin return the index of a NaN when there is
  one. Complex inputs raise where Nx raises (`reduce_max`, `reduce_min`,
  `argmax`, `argmin`, `median`, `mode`, `logsumexp`, `sort`, `argsort`).
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  # ---------------------------------------------------------------------------
  # Aggregates over axes
  # ---------------------------------------------------------------------------

  @doc """
  The sum of the elements, over `axes` (default: all).

  Integer inputs accumulate in the aggregate type (u8/u16/u32 sum to u32,
  u64 to s64, s8/s16/s32 to s32); integer overflow wraps.

  ## Options

    * `:axes` - the axes to reduce (default `nil`: all)
    * `:keep_axes` - keep reduced axes as size 1 (default `false`)

  ## Examples

      iex> Emily.Tensor.sum(Emily.Tensor.tensor([1, 2, 3]))
      #Emily.Tensor<
        s32
        6
      >

      iex> Emily.Tensor.sum(Emily.Tensor.tensor([[101, 102], [103, 104]], type: :s8))
      #Emily.Tensor<
        s32
        410
      >

      iex> t = Emily.Tensor.iota({2, 2, 3})
      iex> Emily.Tensor.sum(t, axes: [0, 2])
      #Emily.Tensor<
        s32[2]
        [24, 42]
      >

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.sum(t, axes: [0], keep_axes: true)
      #Emily.Tensor<
        s32[1][2]
        [
          [4, 6]
        ]
      >
  """
  def sum(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    aggregate(Core.cast(t, Type.to_aggregate(t.type)), :sum, opts)
  end

  @doc """
  The product of the elements, over `axes` (default: all), in the
  aggregate type like `sum/2`.

  ## Examples

      iex> Emily.Tensor.product(Emily.Tensor.tensor([[1.0, 2.0], [3.0, 4.0]]))
      #Emily.Tensor<
        f32
        24.0
      >

      iex> Emily.Tensor.product(Emily.Tensor.tensor([[10, 20], [30, 40]], type: :u8))
      #Emily.Tensor<
        u32
        240000
      >

      iex> Emily.Tensor.product(Emily.Tensor.iota({2, 2, 3}), axes: [-1])
      #Emily.Tensor<
        s32[2][2]
        [
          [0, 60],
          [336, 990]
        ]
      >
  """
  def product(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    aggregate(Core.cast(t, Type.to_aggregate(t.type)), :product, opts)
  end

  @doc """
  The largest element over `axes` (default: all); same type as the input.
  A NaN in a float reduction gives NaN. Complex inputs raise.

  ## Examples

      iex> Emily.Tensor.reduce_max(Emily.Tensor.tensor([1, 2, 3]))
      #Emily.Tensor<
        s32
        3
      >

      iex> t = Emily.Tensor.tensor([[3, 1, 4], [2, 1, 1]])
      iex> Emily.Tensor.reduce_max(t, axes: [1])
      #Emily.Tensor<
        s32[2]
        [4, 2]
      >

      iex> t = Emily.Tensor.tensor([[[1, 2], [4, 5]], [[2, 4], [3, 8]]])
      iex> Emily.Tensor.reduce_max(t, axes: [0, 2], keep_axes: true)
      #Emily.Tensor<
        s32[1][2][1]
        [
          [
            [4],
            [8]
          ]
        ]
      >
  """
  def reduce_max(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    no_complex!(t, "reduce_max/2")
    aggregate(t, :max, opts)
  end

  @doc """
  The smallest element over `axes` (default: all); same type as the input.
  A NaN in a float reduction gives NaN. Complex inputs raise.

  ## Examples

      iex> t = Emily.Tensor.tensor([[3, 1, 4], [2, 1, 1]])
      iex> Emily.Tensor.reduce_min(t, axes: [0])
      #Emily.Tensor<
        s32[3]
        [2, 1, 1]
      >

      iex> Emily.Tensor.reduce_min(Emily.Tensor.tensor(42.0))
      #Emily.Tensor<
        f32
        42.0
      >
  """
  def reduce_min(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    no_complex!(t, "reduce_min/2")
    aggregate(t, :min, opts)
  end

  @doc """
  1 (u8) where every element over `axes` is non-zero, else 0.

  ## Examples

      iex> Emily.Tensor.all(Emily.Tensor.tensor([0, 1, 2]))
      #Emily.Tensor<
        u8
        0
      >

      iex> t = Emily.Tensor.tensor([[-1, 0, 1], [2, 3, 4]])
      iex> Emily.Tensor.all(t, axes: [0])
      #Emily.Tensor<
        u8[3]
        [1, 0, 1]
      >

      iex> t = Emily.Tensor.tensor([[-1, 0, 1], [2, 3, 4]])
      iex> Emily.Tensor.all(t, axes: [1], keep_axes: true)
      #Emily.Tensor<
        u8[2][1]
        [
          [0],
          [1]
        ]
      >
  """
  def all(tensor, opts \\ []), do: aggregate(Core.to_tensor(tensor), :all, opts, {:u, 8})

  @doc """
  1 (u8) where any element over `axes` is non-zero, else 0.

  ## Examples

      iex> Emily.Tensor.any(Emily.Tensor.tensor([0, 1, 2]))
      #Emily.Tensor<
        u8
        1
      >

      iex> t = Emily.Tensor.tensor([[0, 1, 0], [0, 1, 2]])
      iex> Emily.Tensor.any(t, axes: [0])
      #Emily.Tensor<
        u8[3]
        [0, 1, 1]
      >
  """
  def any(tensor, opts \\ []), do: aggregate(Core.to_tensor(tensor), :any, opts, {:u, 8})

  # Nx: `axes: []` reduces nothing and only converts to the output type.
  defp aggregate(%Emily.Tensor{} = t, op, opts, out_type \\ nil) do
    opts = Core.options!(opts, axes: nil, keep_axes: false)
    keep = opts[:keep_axes] == true

    case axes_opt(t, opts[:axes]) do
      [] ->
        Core.cast(t, out_type || t.type)

      axes ->
        Core.wrap(apply(Native, op, [t.ref, axes, keep]))
    end
  end

  # nil (all axes) or a normalised list.
  defp axes_opt(_t, nil), do: nil
  defp axes_opt(t, axes) when is_list(axes), do: Core.axes!(axes, tuple_size(t.shape))

  defp axes_opt(_t, axes),
    do: raise(ArgumentError, "expected :axes to be a list of integers, got: #{inspect(axes)}")

  # Elements reduced per output for `axes` (nil: all).
  defp reduced_count(t, nil), do: tuple_product(t.shape)
  defp reduced_count(t, axes), do: Enum.reduce(axes, 1, &(elem(t.shape, &1) * &2))

  defp tuple_product(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))

  # ---------------------------------------------------------------------------
  # Means and spreads
  # ---------------------------------------------------------------------------

  @doc """
  The mean over `axes` (default: all): `sum/2` divided by the number of
  reduced elements. Integer inputs give f32.

  ## Examples

      iex> Emily.Tensor.mean(Emily.Tensor.tensor([1, 2, 3]))
      #Emily.Tensor<
        f32
        2.0
      >

      iex> Emily.Tensor.mean(Emily.Tensor.iota({2, 2, 3}), axes: [0, 2])
      #Emily.Tensor<
        f32[2]
        [4.0, 7.0]
      >

      iex> Emily.Tensor.mean(Emily.Tensor.iota({2, 2, 3}), axes: [-1], keep_axes: true)
      #Emily.Tensor<
        f32[2][2][1]
        [
          [
            [1.0],
            [4.0]
          ],
          [
            [7.0],
            [10.0]
          ]
        ]
      >
  """
  def mean(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    opts = Core.options!(opts, axes: nil, keep_axes: false)
    axes = axes_opt(t, opts[:axes])
    divide(sum(t, opts), reduced_count(t, axes))
  end

  @doc """
  The variance over `axes` (default: all): the mean squared deviation from
  the mean, divided by `n - ddof`. Complex inputs give the variance of the
  magnitudes' deviations (a real result).

  ## Options

    * `:axes`, `:keep_axes` - as `sum/2`
    * `:ddof` - delta degrees of freedom (default 0)

  ## Examples

      iex> Emily.Tensor.variance(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      #Emily.Tensor<
        f32
        1.25
      >

      iex> Emily.Tensor.variance(Emily.Tensor.tensor([[1, 2], [3, 4]]), ddof: 1)
      #Emily.Tensor<
        f32
        1.6666666
      >

      iex> Emily.Tensor.variance(Emily.Tensor.tensor([[1, 2], [3, 4]]), axes: [0], ddof: 1)
      #Emily.Tensor<
        f32[2]
        [2.0, 2.0]
      >

      iex> Emily.Tensor.variance(Emily.Tensor.tensor([[1, 2], [3, 4]]), axes: [1], keep_axes: true)
      #Emily.Tensor<
        f32[2][1]
        [
          [0.25],
          [0.25]
        ]
      >
  """
  def variance(tensor, opts \\ []) do
    t = Core.to_tensor(tensor)
    opts = Core.options!(opts, axes: nil, ddof: 0, keep_axes: false)
    ddof = opts[:ddof]

    unless is_integer(ddof) and ddof >= 0 do
      raise ArgumentError, "expected :ddof to be a non-negative integer, got: #{inspect(ddof)}"
    end

    axes = axes_opt(t, opts[:axes])
    n = reduced_count(t, axes)
    m = mean(t, axes: axes, keep_axes: true)
    centered = binary(:subtract, t, m)

    squared =
      if Type.complex?(centered.type) do
        a = Core.wrap(Native.abs(centered.ref))
        binary(:multiply, a, a)
      else
        binary(:multiply, centered, centered)
      end

    divide(sum(squared, axes: axes, keep_axes: opts[:keep_axes]), n - ddof)
  end

  @doc """
  The standard deviation: the square root of `variance/2` (same options).

  ## Examples

      iex> Emily.Tensor.standard_deviation(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      #Emily.Tensor<
        f32
        1.118034
      >

      iex> Emily.Tensor.standard_deviation(Emily.Tensor.tensor([[1, 2], [3, 4]]), axes: [1])
      #Emily.Tensor<
        f32[2]
        [0.5, 0.5]
      >
  """
  def standard_deviation(tensor, opts \\ []) do
    v = variance(tensor, opts)
    Core.wrap(Native.sqrt(v.ref))
  end

  @doc """
  The mean of `tensor` weighted by `weights`, over `axes` (default: all):
  `sum(tensor * weights) / sum(weights)`.

  `weights` has the tensor's shape, or, with `:axes` given, one dimension
  per reduced axis (as Nx, it is reshaped and its first reduced axis is
  swapped with the last before broadcasting).

  ## Examples

      iex> Emily.Tensor.weighted_mean(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([3, 2, 1]))
      #Emily.Tensor<
        f32
        1.6666666
      >

      iex> t = Emily.Tensor.iota({3, 4})
      iex> Emily.Tensor.weighted_mean(t, Emily.Tensor.tensor([1, 2, 3, 4]), axes: [1])
      #Emily.Tensor<
        f32[3]
        [2.0, 6.0, 10.0]
      >
  """
  def weighted_mean(tensor, weights, opts \\ []) do
    opts = Core.options!(opts, axes: nil, keep_axes: false)
    t = Core.to_tensor(tensor)
    w = Core.to_tensor(weights)
    axes = axes_opt(t, opts[:axes])

    w =
      if t.shape != w.shape do
        cond do
          axes == nil ->
            raise ArgumentError, "axes must be specified when shapes of input and weights differ"

          tuple_size(w.shape) != length(axes) ->
            raise ArgumentError,
                  "weights tensor must have rank equal to the number of aggregation axes " <>
                    "when input shapes differ"

          true ->
            :ok
        end

        rank = tuple_size(t.shape)
        dims = List.duplicate(1, rank - length(axes)) ++ Tuple.to_list(w.shape)
        first = hd(axes)
        perm = Enum.to_list(0..(rank - 1)) |> swap(first, rank - 1)
        r = Native.reshape(w.ref, dims)
        Core.wrap(Native.transpose(r, perm))
      else
        w
      end

    sum_opts = [axes: axes, keep_axes: opts[:keep_axes]]
    num = sum(binary(:multiply, t, w), sum_opts)
    divide(num, sum(w, sum_opts))
  end

  defp swap(list, i, j) do
    a = Enum.at(list, i)
    b = Enum.at(list, j)
    list |> List.replace_at(i, b) |> List.replace_at(j, a)
  end

  @doc """
  The log of the sum of exponentials over `axes` (default: all), computed
  stably: the maximum is subtracted first and added back (an infinite
  maximum is replaced by 0, so an all `-Inf` input gives `-Inf`).

  ## Options

    * `:axes`, `:keep_axes` - as `sum/2`
    * `:exp_scaling_factor` - multiplies each exponential (default 1)

  ## Examples

      iex> Emily.Tensor.logsumexp(Emily.Tensor.tensor([1, 2, 3, 4, 5, 6]))
      #Emily.Tensor<
        f32
        6.4561934
      >

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4], [5, 6]])
      iex> Emily.Tensor.logsumexp(t, axes: [0])
      #Emily.Tensor<
        f32[2]
        [5.1429315, 6.1429315]
      >
  """
  def logsumexp(tensor, opts \\ []) do
    opts = Core.options!(opts, axes: nil, keep_axes: false, exp_scaling_factor: 1)
    t = Core.to_tensor(tensor)
    no_complex!(t, "logsumexp/2")
    t = Core.cast(t, Type.to_floating(t.type))
    axes = axes_opt(t, opts[:axes])
    keep = opts[:keep_axes] == true

    max_keep = aggregate(t, :max, axes: axes, keep_axes: true)
    zero = Core.to_tensor(0, max_keep.type)
    inf = Core.wrap(Native.is_infinity(max_keep.ref))
    max_keep = Core.wrap(Native.select(inf.ref, zero.ref, max_keep.ref))

    e = Core.wrap(Native.exp(binary(:subtract, t, max_keep).ref))
    e = binary(:multiply, opts[:exp_scaling_factor], e)
    s = sum(e, axes: axes, keep_axes: keep)
    log = Core.wrap(Native.log(s.ref))

    max_out =
      if keep, do: max_keep, else: Core.wrap(Native.reshape(max_keep.ref, Tuple.to_list(s.shape)))

    binary(:add, log, max_out)
  end

  # ---------------------------------------------------------------------------
  # Order statistics
  # ---------------------------------------------------------------------------

  @doc """
  The median along `axis` (default: of all elements). Built on `sort/2`, so
  NaN sorts last. When the count is odd the median keeps the input type;
  when even it is the mean of the two middle elements (f32 for integers).

  ## Options

    * `:axis` - the axis to reduce (default `nil`: all elements)
    * `:keep_axis` - keep the reduced axis as size 1 (default `false`;
      ignored without `:axis`)

  ## Examples

      iex> Emily.Tensor.median(Emily.Tensor.tensor([1, 2, 3]))
      #Emily.Tensor<
        s32
        2
      >

      iex> Emily.Tensor.median(Emily.Tensor.tensor([1, 2]))
      #Emily.Tensor<
        f32
        1.5
      >

      iex> Emily.Tensor.median(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), axis: 0)
      #Emily.Tensor<
        f32[3]
        [2.5, 3.5, 4.5]
      >

      iex> t = Emily.Tensor.tensor([[[1, 2, 2], [3, 4, 2]], [[4, 5, 2], [7, 9, 2]]])
      iex> Emily.Tensor.median(t, axis: -1, keep_axis: true)
      #Emily.Tensor<
        s32[2][2][1]
        [
          [
            [2],
            [3]
          ],
          [
            [4],
            [7]
          ]
        ]
      >
  """
  def median(tensor, opts \\ []) do
    opts = Core.options!(opts, axis: nil, keep_axis: false)
    t = Core.to_tensor(tensor)
    no_complex!(t, "median/2")
    rank = tuple_size(t.shape)

    case opts[:axis] do
      nil ->
        n = tuple_product(t.shape)
        if n == 0, do: raise(ArgumentError, "cannot compute the median of an empty tensor")
        flat = Core.wrap(Native.reshape(t.ref, [n]))
        sorted = sort(flat)
        half = div(n, 2)

        if rem(n, 2) == 1 do
          slice_axis(sorted, 0, half, 1) |> reshape([])
        else
          # As Nx: the two middle elements are added in the input type.
          lo = slice_axis(sorted, 0, half - 1, 1) |> reshape([])
          hi = slice_axis(sorted, 0, half, 1) |> reshape([])
          divide(binary(:add, lo, hi), 2)
        end

      axis ->
        axis = Core.axis!(axis, rank)
        n = elem(t.shape, axis)
        if n == 0, do: raise(ArgumentError, "cannot compute the median of an empty axis")
        sorted = sort(t, axis: axis)
        half = div(n, 2)

        if rem(n, 2) == 1 do
          res = slice_axis(sorted, axis, half, 1)
          if opts[:keep_axis], do: res, else: squeeze(res, axis)
        else
          two = slice_axis(sorted, axis, half - 1, 2)
          mean(two, axes: [axis], keep_axes: opts[:keep_axis])
        end
    end
  end

  @doc """
  The most frequent value along `axis` (default: of all elements); ties go
  to the smallest value. Same type as the input. NaNs never count as equal.

  ## Options

    * `:axis` - the axis to reduce (default `nil`: all elements)
    * `:keep_axis` - keep the reduced axis (or, without `:axis`, every
      axis) as size 1 (default `false`)

  ## Examples

      iex> Emily.Tensor.mode(Emily.Tensor.tensor([1, 2, 2, 3, 5]))
      #Emily.Tensor<
        s32
        2
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]])
      iex> Emily.Tensor.mode(t, axis: 0)
      #Emily.Tensor<
        s32[5]
        [1, 1, 2, 3, 1]
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]])
      iex> Emily.Tensor.mode(t, axis: 1, keep_axis: true)
      #Emily.Tensor<
        s32[2][1]
        [
          [2],
          [1]
        ]
      >
  """
  def mode(tensor, opts \\ []) do
    opts = Core.options!(opts, axis: nil, keep_axis: false)
    t = Core.to_tensor(tensor)
    no_complex!(t, "mode/2")
    rank = tuple_size(t.shape)
    size = tuple_product(t.shape)
    axis = if opts[:axis] != nil, do: Core.axis!(opts[:axis], rank)
    keep = opts[:keep_axis] == true

    cond do
      rank == 0 ->
        if keep, do: reshape(t, [1]), else: t

      size == 0 ->
        raise ArgumentError, "cannot compute the mode of an empty tensor"

      axis == nil ->
        res = mode_along(reshape(t, [size]), 0) |> reshape([])
        if keep, do: reshape(res, List.duplicate(1, rank)), else: res

      elem(t.shape, axis) == 1 ->
        if keep, do: t, else: squeeze(t, axis)

      true ->
        res = mode_along(t, axis)
        if keep, do: res, else: squeeze(res, axis)
    end
  end

  # The mode along `axis`, keeping the axis as size 1. In the sorted rows,
  # each run of equal values is a group; a running count restarts at each
  # group start (the index of the start is spread over the group by a
  # cumulative max), and the first position where the count peaks is the
  # last element of the first (smallest) most frequent group.
  defp mode_along(t, axis) do
    sorted = sort(t, axis: axis)
    shape = Tuple.to_list(t.shape)
    n = elem(t.shape, axis)
    idx_type = {:s, 64}
    iota = Native.iota(shape, axis, idx_type)

    differs =
      Native.not_equal(
        slice_axis(sorted, axis, 1, n - 1).ref,
        slice_axis(sorted, axis, 0, n - 1).ref
      )

    first =
      Native.full(Native.scalar_s64(1, {:pred, 8}), List.replace_at(shape, axis, 1), {:pred, 8})

    starts = Native.concatenate([first, differs], axis)
    zeros = Native.full(Native.scalar_s64(0, idx_type), shape, idx_type)
    marker = Native.select(starts, iota, zeros)
    group_start = cumulative_max(marker, shape, axis, idx_type)
    run = Native.subtract(iota, group_start)
    pos = Native.argmax(run, axis, true, false, idx_type)
    Core.wrap(Emily.take_along_axis(sorted.ref, pos, axis))
  end

  # Inclusive running max of a non-negative integer ref along `axis`
  # (Hillis-Steele: log2(n) shifted maxima).
  defp cumulative_max(ref, shape, axis, type) do
    n = Enum.at(shape, axis)
    zero = Native.scalar_s64(0, type)

    Stream.iterate(1, &(&1 * 2))
    |> Enum.take_while(&(&1 < n))
    |> Enum.reduce(ref, fn k, acc ->
      pad = Native.full(zero, List.replace_at(shape, axis, k), type)
      {start, stop} = axis_bounds(shape, axis, 0, n - k)
      head = Native.slice(acc, start, stop, List.duplicate(1, length(shape)))
      Native.maximum(acc, Native.concatenate([pad, head], axis))
    end)
  end

  # ---------------------------------------------------------------------------
  # argmax / argmin
  # ---------------------------------------------------------------------------

  @doc """
  The index of the largest element along `axis`, or in the flattened
  tensor when no axis is given (a scalar). A NaN counts as the largest
  (its index is returned). Complex inputs raise.

  ## Options

    * `:axis` - the axis to reduce (default `nil`: the flat index)
    * `:keep_axis` - keep the reduced axis as size 1 (default `false`)
    * `:tie_break` - `:low` (default) or `:high` index among equal maxima
    * `:type` - the index type (default `:s32`)

  ## Examples

      iex> t = Emily.Tensor.tensor([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      iex> Emily.Tensor.argmax(t)
      #Emily.Tensor<
        s32
        10
      >

      iex> Emily.Tensor.argmax(Emily.Tensor.tensor([2.0, :nan, 4.0]))
      #Emily.Tensor<
        s32
        1
      >

      iex> t = Emily.Tensor.tensor([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      iex> Emily.Tensor.argmax(t, axis: 0)
      #Emily.Tensor<
        s32[2][3]
        [
          [1, 0, 0],
          [1, 1, 0]
        ]
      >

      iex> t = Emily.Tensor.tensor([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      iex> Emily.Tensor.argmax(t, tie_break: :high, axis: 1, type: :u32)
      #Emily.Tensor<
        u32[2][3]
        [
          [0, 0, 1],
          [0, 1, 1]
        ]
      >
  """
  def argmax(tensor, opts \\ []), do: arg_reduce(tensor, :argmax, opts)

  @doc """
  The index of the smallest element along `axis`, or in the flattened
  tensor when no axis is given. A NaN counts as the smallest. Options as
  `argmax/2`.

  ## Examples

      iex> t = Emily.Tensor.tensor([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      iex> Emily.Tensor.argmin(t)
      #Emily.Tensor<
        s32
        4
      >

      iex> t = Emily.Tensor.tensor([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      iex> Emily.Tensor.argmin(t, axis: 1, keep_axis: true)
      #Emily.Tensor<
        s32[2][1][3]
        [
          [
            [1, 1, 0]
          ],
          [
            [1, 0, 0]
          ]
        ]
      >
  """
  def argmin(tensor, opts \\ []), do: arg_reduce(tensor, :argmin, opts)

  defp arg_reduce(tensor, op, opts) do
    opts = Core.options!(opts, axis: nil, tie_break: :low, keep_axis: false, type: {:s, 32})

    tie_high =
      case opts[:tie_break] do
        :high ->
          true

        :low ->
          false

        other ->
          raise ArgumentError,
                "unknown value for :tie_break, expected :high or :low, got: #{inspect(other)}"
      end

    t = Core.to_tensor(tensor)
    no_complex!(t, "#{op}/2")
    type = index_type!(opts[:type])

    case opts[:axis] do
      nil ->
        Core.wrap(apply(Native, op, [t.ref, nil, false, tie_high, type]))

      axis ->
        axis = Core.axis!(axis, tuple_size(t.shape))
        Core.wrap(apply(Native, op, [t.ref, axis, opts[:keep_axis] == true, tie_high, type]))
    end
  end

  defp index_type!(type) do
    type = Type.normalize!(type)

    unless Type.integer?(type) do
      raise ArgumentError, "expected an integer :type for the indices, got: #{inspect(type)}"
    end

    type
  end

  # ---------------------------------------------------------------------------
  # all_close
  # ---------------------------------------------------------------------------

  @doc """
  1 (a u8 scalar) when every element of `a` is within tolerance of `b`
  (they broadcast): `abs(a - b) <= atol + rtol * abs(b)`. Infinities are
  close only to an equal infinity; NaN is close to nothing unless
  `equal_nan: true` (then NaN is close to NaN).

  ## Options

    * `:rtol` - relative tolerance (default `1.0e-5`)
    * `:atol` - absolute tolerance (default `1.0e-8`)
    * `:equal_nan` - whether NaN equals NaN (default `false`)

  ## Examples

      iex> Emily.Tensor.all_close(Emily.Tensor.tensor([1.0e10, 1.0e-7]), Emily.Tensor.tensor([1.00001e10, 1.0e-8]))
      #Emily.Tensor<
        u8
        0
      >

      iex> Emily.Tensor.all_close(Emily.Tensor.tensor([1.0e-8, 1.0e-8]), Emily.Tensor.tensor([1.0e-8, 1.0e-9]))
      #Emily.Tensor<
        u8
        1
      >

      iex> t = Emily.Tensor.tensor([:nan, 1])
      iex> Emily.Tensor.all_close(t, t, equal_nan: true)
      #Emily.Tensor<
        u8
        1
      >
  """
  def all_close(a, b, opts \\ []) do
    opts = Core.options!(opts, equal_nan: false, rtol: 1.0e-5, atol: 1.0e-8)
    a = Core.to_tensor(a)
    b = Core.to_tensor(b)

    close =
      if Type.integer?(a.type) and Type.integer?(b.type) do
        diff = Core.wrap(Native.abs(binary(:subtract, a, b).ref)) |> Core.cast({:f, 64})
        abs_b = Core.wrap(Native.abs(Core.cast(b, {:f, 64}).ref))
        bound = binary(:add, opts[:atol], binary(:multiply, opts[:rtol], abs_b))
        binary(:less_equal, diff, bound)
      else
        diff = Core.wrap(Native.abs(binary(:subtract, a, b).ref))
        abs_b = Core.wrap(Native.abs(b.ref))
        bound = binary(:add, opts[:atol], binary(:multiply, opts[:rtol], abs_b))
        finite = binary(:less_equal, diff, bound)

        inf =
          binary(
            :logical_or,
            Core.wrap(Native.is_infinity(a.ref)),
            Core.wrap(Native.is_infinity(b.ref))
          )

        close = Core.wrap(Native.select(inf.ref, binary(:equal, a, b).ref, finite.ref))

        if opts[:equal_nan] do
          nan =
            binary(:logical_and, Core.wrap(Native.is_nan(a.ref)), Core.wrap(Native.is_nan(b.ref)))

          binary(:logical_or, nan, close)
        else
          close
        end
      end

    Core.wrap(Native.all(close.ref, nil, false))
  end

  # ---------------------------------------------------------------------------
  # Sorting
  # ---------------------------------------------------------------------------

  @doc """
  Sorts along `axis` (default 0). The sort is always stable; NaN is the
  largest value (ascending: `[-Inf, ..., Inf, NaN]`; descending puts NaN
  first). Same type as the input; complex inputs raise.

  ## Options

    * `:axis` - the axis to sort (default 0)
    * `:direction` - `:asc` (default) or `:desc`
    * `:stable` - accepted for compatibility (the sort is always stable)

  ## Examples

      iex> Emily.Tensor.sort(Emily.Tensor.tensor([16, 23, 42, 4, 8, 15]))
      #Emily.Tensor<
        s32[6]
        [4, 8, 15, 16, 23, 42]
      >

      iex> t = Emily.Tensor.tensor([[3, 1, 7], [2, 5, 4]])
      iex> Emily.Tensor.sort(t, axis: 1, direction: :desc)
      #Emily.Tensor<
        s32[2][3]
        [
          [7, 3, 1],
          [5, 4, 2]
        ]
      >

      iex> Emily.Tensor.sort(Emily.Tensor.tensor([:nan, 1.0, :neg_infinity, :infinity, 0.0]))
      #Emily.Tensor<
        f32[5]
        [-Inf, 0.0, 1.0, Inf, NaN]
      >
  """
  def sort(tensor, opts \\ []) do
    opts = Core.options!(opts, axis: 0, direction: :asc, stable: false)
    t = Core.to_tensor(tensor)
    no_complex!(t, "sort/2")
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    Core.wrap(Native.sort(t.ref, axis, descending?(opts[:direction])))
  end

  @doc """
  The indices that sort `tensor` along `axis` (default 0), stably: equal
  elements keep their order, in either direction. NaN counts as the
  largest value. Complex inputs raise.

  ## Options

    * `:axis`, `:direction`, `:stable` - as `sort/2`
    * `:type` - the index type (default `:s32`)

  ## Examples

      iex> Emily.Tensor.argsort(Emily.Tensor.tensor([16, 23, 42, 4, 8, 15]))
      #Emily.Tensor<
        s32[6]
        [3, 4, 5, 0, 1, 2]
      >

      iex> t = Emily.Tensor.tensor([[3, 1, 7], [2, 5, 4]])
      iex> Emily.Tensor.argsort(t, axis: 1, direction: :desc, type: :u8)
      #Emily.Tensor<
        u8[2][3]
        [
          [2, 0, 1],
          [1, 2, 0]
        ]
      >

      iex> Emily.Tensor.argsort(Emily.Tensor.tensor([1, 3, 1, 2, 3]), direction: :desc)
      #Emily.Tensor<
        s32[5]
        [1, 4, 3, 0, 2]
      >
  """
  def argsort(tensor, opts \\ []) do
    opts = Core.options!(opts, axis: 0, direction: :asc, stable: false, type: {:s, 32})
    t = Core.to_tensor(tensor)
    no_complex!(t, "argsort/2")
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    type = index_type!(opts[:type])
    Core.wrap(Native.argsort(t.ref, axis, descending?(opts[:direction]), type))
  end

  defp descending?(:asc), do: false
  defp descending?(:desc), do: true

  defp descending?(other),
    do:
      raise(
        ArgumentError,
        "unknown value for :direction, expected :asc or :desc, got: #{inspect(other)}"
      )

  # ---------------------------------------------------------------------------
  # Covariance and reduce with a user function
  # ---------------------------------------------------------------------------

  @doc """
  The covariance matrix of the last two axes of `tensor` (`{..., n, d}`
  observations by variables gives `{..., d, d}`): `sum(conj(x - mean)ᵀ
  (x - mean)) / (n - ddof)` over the `n` axis, batched over the leading
  axes. The result is floating point.

  `covariance(tensor, opts)` takes the mean of each variable
  (`mean(tensor, axes: [-2])`); `covariance(tensor, mean, opts)` uses the
  given `mean` (rank 1 or more, broadcast against `tensor`).

  ## Options

    * `:ddof` - delta degrees of freedom (default `0`)

  ## Examples

      iex> Emily.Tensor.covariance(Emily.Tensor.tensor([[1, 2], [3, 4], [5, 6]]))
      #Emily.Tensor<
        f32[2][2]
        [
          [2.6666667, 2.6666667],
          [2.6666667, 2.6666667]
        ]
      >

      iex> Emily.Tensor.covariance(Emily.Tensor.tensor([[1, 2], [3, 4], [5, 6]]), ddof: 1)
      #Emily.Tensor<
        f32[2][2]
        [
          [4.0, 4.0],
          [4.0, 4.0]
        ]
      >

      iex> Emily.Tensor.covariance(Emily.Tensor.tensor([[[1, 2], [3, 4], [5, 6]], [[7, 6], [5, 4], [3, 2]]]))
      #Emily.Tensor<
        f32[2][2][2]
        [
          [
            [2.6666667, 2.6666667],
            [2.6666667, 2.6666667]
          ],
          [
            [2.6666667, 2.6666667],
            [2.6666667, 2.6666667]
          ]
        ]
      >

      iex> Emily.Tensor.covariance(Emily.Tensor.tensor([[1, 2], [3, 4], [5, 6]]), Emily.Tensor.tensor([4, 3]))
      #Emily.Tensor<
        f32[2][2]
        [
          [3.6666667, 1.6666666],
          [1.6666666, 3.6666667]
        ]
      >
  """
  def covariance(tensor, mean_or_opts \\ [], opts \\ [])

  def covariance(tensor, opts, more) when is_list(opts) do
    if more != [] do
      raise ArgumentError,
            "covariance/3 expects a mean tensor as its second argument, got: #{inspect(opts)}"
    end

    covariance_impl(tensor, nil, opts)
  end

  def covariance(tensor, mean, opts), do: covariance_impl(tensor, mean, opts)

  defp covariance_impl(tensor, mean, opts) do
    opts = Core.options!(opts, ddof: 0)
    t = Core.to_tensor(tensor)
    rank = tuple_size(t.shape)
    ddof = opts[:ddof]

    if rank < 2 do
      raise ArgumentError, "expected input tensor of rank 2 or more, got rank: #{rank}"
    end

    unless is_integer(ddof) and ddof >= 0 do
      raise ArgumentError, "expected :ddof to be a non-negative integer, got: #{inspect(ddof)}"
    end

    mean = if mean == nil, do: mean(t, axes: [-2]), else: Core.to_tensor(mean)

    if tuple_size(mean.shape) < 1 do
      raise ArgumentError, "expected mean of rank 1 or more, got rank: #{tuple_size(mean.shape)}"
    end

    # the mean has one value per variable: {d} or {..., d}; it is broadcast
    # over the n observations (axis -2)
    x = Emily.Tensor.subtract(t, Emily.Tensor.new_axis(mean, -2))
    cx = if Type.complex?(x.type), do: Emily.Tensor.conjugate(x), else: x
    batch = Enum.to_list(0..(rank - 3)//1)
    num = Emily.Tensor.dot(cx, [rank - 2], batch, x, [rank - 2], batch)
    divide(num, elem(t.shape, rank - 2) - ddof)
  end

  @doc """
  Reduces `tensor` over `:axes` (default: all) with `fun`, starting from
  the scalar accumulator `acc`, as `Nx.reduce/4`.

  `fun` receives two scalar tensors, an element and the accumulator
  (`fun.(x, acc)`), and returns the new accumulator. It should be
  associative (Nx does not fix the order of the calls). The result type is
  the merge of the tensor's type and the accumulator's (`:type` overrides
  it); the element and the accumulator are given to `fun` in that type.

  **Host path.** Emily runs `fun` on the host, once per element, over
  scalar tensors: it is meant for custom reducers that have no engine
  primitive and costs about 30 µs per element (measured: 29 µs per
  element with `fn x, acc -> Emily.Tensor.add(x, acc) end` over 10 000
  f32 elements on the shared development machine). Prefer `sum/2`, `product/2`, `reduce_max/2`,
  `reduce_min/2`, `all/2` and `any/2`, which run in the engine.

  ## Options

    * `:axes` - the axes to reduce (default `nil`: all)
    * `:keep_axes` - keep reduced axes as size 1 (default `false`)
    * `:type` - the type of the result

  ## Examples

      iex> Emily.Tensor.reduce(Emily.Tensor.tensor(42), 0, fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32
        42
      >

      iex> Emily.Tensor.reduce(Emily.Tensor.tensor([1, 2, 3]), 0, fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32
        6
      >

      iex> Emily.Tensor.reduce(Emily.Tensor.tensor([[1.0, 2.0], [3.0, 4.0]]), 0, fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        f32
        10.0
      >

      iex> t = Emily.Tensor.tensor([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
      iex> Emily.Tensor.reduce(t, 0, [axes: [0]], fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32[2][3]
        [
          [8, 10, 12],
          [14, 16, 18]
        ]
      >

      iex> t = Emily.Tensor.tensor([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
      iex> Emily.Tensor.reduce(t, 0, [axes: [0, 2]], fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32[2]
        [30, 48]
      >

      iex> t = Emily.Tensor.tensor([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
      iex> Emily.Tensor.reduce(t, 0, [axes: [-1]], fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32[2][2]
        [
          [6, 15],
          [24, 33]
        ]
      >

      iex> t = Emily.Tensor.tensor([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
      iex> Emily.Tensor.reduce(t, 0, [axes: [0], keep_axes: true], fn x, y -> Emily.Tensor.add(x, y) end)
      #Emily.Tensor<
        s32[1][2][3]
        [
          [
            [8, 10, 12],
            [14, 16, 18]
          ]
        ]
      >
  """
  def reduce(tensor, acc, opts \\ [], fun) when is_function(fun, 2) do
    opts = Core.options!(opts, axes: nil, type: nil, keep_axes: false)
    t = Core.to_tensor(tensor)
    acc_t = Core.to_tensor(acc)

    if acc_t.shape != {} do
      raise ArgumentError, "the accumulator must be a scalar, got shape: #{inspect(acc_t.shape)}"
    end

    type = if opts[:type], do: Type.normalize!(opts[:type]), else: promoted_type(t, acc)
    rank = tuple_size(t.shape)
    dims = Tuple.to_list(t.shape)

    axes =
      case opts[:axes] do
        nil -> Enum.to_list(0..(rank - 1)//1)
        list -> list |> axes_opt_list(t) |> Enum.uniq() |> Enum.sort()
      end

    kept = Enum.to_list(0..(rank - 1)//1) -- axes

    out_dims =
      if opts[:keep_axes] == true,
        do: Enum.map(0..(rank - 1)//1, fn i -> if i in axes, do: 1, else: Enum.at(dims, i) end),
        else: Enum.map(kept, &Enum.at(dims, &1))

    n_red = Enum.reduce(axes, 1, &(Enum.at(dims, &1) * &2))
    n_out = Enum.reduce(out_dims, 1, &(&1 * &2))
    acc0 = acc_t |> Core.cast(type) |> Emily.Tensor.to_number()

    cond do
      n_out == 0 ->
        Emily.Tensor.broadcast(Emily.Tensor.tensor(acc0, type: type), List.to_tuple(out_dims))

      n_red == 0 ->
        Emily.Tensor.broadcast(Emily.Tensor.tensor(acc0, type: type), List.to_tuple(out_dims))

      true ->
        flat = t |> Emily.Tensor.transpose(axes: kept ++ axes) |> Emily.Tensor.to_flat_list()

        values =
          flat
          |> Enum.chunk_every(n_red)
          |> Enum.map(fn group ->
            Enum.reduce(group, acc0, fn x, a -> host_apply(fun, x, a, type) end)
          end)

        values |> Emily.Tensor.tensor(type: type) |> Emily.Tensor.reshape(List.to_tuple(out_dims))
    end
  end

  defp axes_opt_list(list, t) when is_list(list), do: Core.axes!(list, tuple_size(t.shape))

  defp axes_opt_list(other, _t),
    do: raise(ArgumentError, "expected :axes to be a list of integers, got: #{inspect(other)}")

  # One call of a user reducer on the host: both operands as scalar tensors
  # of `type`, the result cast back to `type` and read as a number.
  defp host_apply(fun, x, acc, type) do
    result = fun.(Emily.Tensor.tensor(x, type: type), Emily.Tensor.tensor(acc, type: type))
    result |> Core.to_tensor() |> Core.cast(type) |> Emily.Tensor.to_number()
  end

  # ---------------------------------------------------------------------------
  # Private helpers (element-wise ops with Nx promotion, shape plumbing)
  # ---------------------------------------------------------------------------

  defp no_complex!(%Emily.Tensor{type: type}, fun) do
    if Type.complex?(type) do
      raise ArgumentError, "Emily.Tensor.#{fun} does not support complex inputs"
    end
  end

  # A binary engine op with Nx's promotion: tensor/tensor merge, tensor/number
  # merge_number; both sides cast to the common type. Comparisons and
  # logical ops come back as u8 (Core.wrap).
  defp binary(op, a, b) do
    type = promoted_type(a, b)
    Core.wrap(apply(Native, op, [as_ref(a, type), as_ref(b, type)]))
  end

  defp as_ref(%Emily.Tensor{} = t, type), do: Core.cast(t, type).ref
  defp as_ref(n, type), do: Core.to_tensor(n, type).ref

  defp promoted_type(%Emily.Tensor{type: ta}, %Emily.Tensor{type: tb}), do: Type.merge(ta, tb)
  defp promoted_type(%Emily.Tensor{type: t}, n), do: Type.merge_number(t, n)
  defp promoted_type(n, %Emily.Tensor{type: t}), do: Type.merge_number(t, n)
  defp promoted_type(a, b), do: Type.merge(Type.infer(a), Type.infer(b))

  # Nx.divide: the promoted type made floating.
  defp divide(a, b) do
    type = Type.to_floating(promoted_type(a, b))
    Core.wrap(Native.divide(as_ref(a, type), as_ref(b, type)))
  end

  defp reshape(t, dims), do: Core.wrap(Native.reshape(t.ref, dims))
  defp squeeze(t, axis), do: Core.wrap(Native.squeeze(t.ref, [axis]))

  # `len` elements of `t` along `axis` from `start`.
  defp slice_axis(t, axis, start, len) do
    shape = Tuple.to_list(t.shape)
    {starts, stops} = axis_bounds(shape, axis, start, start + len)
    Core.wrap(Native.slice(t.ref, starts, stops, List.duplicate(1, length(shape))))
  end

  defp axis_bounds(shape, axis, start, stop) do
    starts = shape |> Enum.map(fn _ -> 0 end) |> List.replace_at(axis, start)
    stops = List.replace_at(shape, axis, stop)
    {starts, stops}
  end
end
