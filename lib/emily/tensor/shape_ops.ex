defmodule Emily.Tensor.ShapeOps do
  @moduledoc """
  Shape, join, slicing, diagonal and dot functions of `Emily.Tensor`, with
  Nx's semantics (`Nx.reshape/3`, `Nx.pad/3`, `Nx.slice/4`, `Nx.dot/6`, ...).

  Every function here is delegated from `Emily.Tensor`; call them there.
  Tensor arguments also accept numbers (they become scalar tensors). Emily
  has no named axes: `:names`/`name` options are accepted when `nil`.

  Most shape functions are views in the engine (reshape of a compatible
  layout, transpose, broadcast, squeeze, new_axis, slice with integer
  starts, reverse, cropping pads): they share the input's buffer.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @typep tensor :: Emily.Tensor.t()
  @typep tensor_or_number :: Emily.Tensor.t() | number() | Emily.Complex.t()

  # ---------------------------------------------------------------------------
  # reshape, new_axis, squeeze, flatten, tile
  # ---------------------------------------------------------------------------

  @doc """
  Changes the shape of a tensor, keeping its elements in row-major order.

  The new shape is a tuple or a tensor (its shape is taken). One dimension
  may be `:auto`: it is computed from the others. The element count must
  not change.

  ## Options

    * `:names` - only `nil` names are accepted

  ## Examples

      iex> Emily.Tensor.reshape(Emily.Tensor.tensor([1, 2, 3, 4]), {2, 2})
      #Emily.Tensor<
        s32[2][2]
        [
          [1, 2],
          [3, 4]
        ]
      >

      iex> Emily.Tensor.reshape(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), {:auto, 2})
      #Emily.Tensor<
        s32[3][2]
        [
          [1, 2],
          [3, 4],
          [5, 6]
        ]
      >

      iex> Emily.Tensor.reshape(Emily.Tensor.tensor(1), {1, 1, 1})
      #Emily.Tensor<
        s32[1][1][1]
        [
          [
            [1]
          ]
        ]
      >

      iex> Emily.Tensor.reshape(Emily.Tensor.tensor([1, 2, 3]), {2, 2})
      ** (ArgumentError) cannot reshape, current shape {3} is not compatible with new shape {2, 2}
  """
  @spec reshape(tensor_or_number, tuple() | tensor_or_number, keyword()) :: tensor
  def reshape(tensor, new_shape, opts \\ []) do
    opts = Core.options!(opts, names: nil)
    %Emily.Tensor{shape: old_shape} = t = Core.to_tensor(tensor)
    new_shape = resolve_shape!(old_shape, shape_arg!(new_shape, :auto))
    no_names!(opts[:names], tuple_size(new_shape))

    if new_shape == old_shape do
      t
    else
      Core.wrap(Native.reshape(t.ref, Tuple.to_list(new_shape)))
    end
  end

  @doc """
  Adds a new axis of size 1 at `axis` (negative counts from the end of the
  result).

  ## Examples

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.new_axis(t, 1)
      #Emily.Tensor<
        s32[2][1][3]
        [
          [
            [1, 2, 3]
          ],
          [
            [4, 5, 6]
          ]
        ]
      >
      iex> Emily.Tensor.new_axis(t, -1) |> Emily.Tensor.shape()
      {2, 3, 1}
  """
  @spec new_axis(tensor_or_number, integer(), nil) :: tensor
  def new_axis(tensor, axis, name \\ nil) when is_integer(axis) do
    t = Core.to_tensor(tensor)
    no_names!(if(name, do: [name]), 1)
    axis = Core.axis!(axis, tuple_size(t.shape) + 1)
    Core.wrap(Native.expand_dims(t.ref, axis))
  end

  @doc """
  Removes the given size-1 axes (by default every size-1 axis).

  ## Options

    * `:axes` - the axes to remove

  ## Examples

      iex> Emily.Tensor.squeeze(Emily.Tensor.tensor([[[[[1]]]]]))
      #Emily.Tensor<
        s32
        1
      >

      iex> Emily.Tensor.squeeze(Emily.Tensor.tensor([[1, 2, 3]]), axes: [0])
      #Emily.Tensor<
        s32[3]
        [1, 2, 3]
      >

      iex> Emily.Tensor.squeeze(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), axes: [1])
      ** (ArgumentError) cannot squeeze dimensions whose sizes are not 1, got 3 for dimension 1
  """
  @spec squeeze(tensor_or_number, keyword()) :: tensor
  def squeeze(tensor, opts \\ []) do
    opts = Core.options!(opts, axes: nil)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    dims = Tuple.to_list(shape)

    axes =
      case opts[:axes] do
        nil -> for {1, i} <- Enum.with_index(dims), do: i
        axes -> normalize_axes!(axes, shape)
      end

    for axis <- axes, elem(shape, axis) != 1 do
      raise ArgumentError,
            "cannot squeeze dimensions whose sizes are not 1, got #{elem(shape, axis)} " <>
              "for dimension #{axis}"
    end

    if axes == [], do: t, else: Core.wrap(Native.squeeze(t.ref, axes))
  end

  @doc """
  Flattens a tensor to one dimension, or merges the consecutive `:axes`
  into one.

  ## Options

    * `:axes` - consecutive axes to merge (default: all)

  ## Examples

      iex> Emily.Tensor.flatten(Emily.Tensor.iota({2, 2, 2}))
      #Emily.Tensor<
        s32[8]
        [0, 1, 2, 3, 4, 5, 6, 7]
      >

      iex> Emily.Tensor.flatten(Emily.Tensor.iota({1, 2, 3}), axes: [1, 2])
      #Emily.Tensor<
        s32[1][6]
        [
          [0, 1, 2, 3, 4, 5]
        ]
      >

      iex> Emily.Tensor.flatten(Emily.Tensor.iota({1, 2, 3}), axes: [0, 2])
      ** (ArgumentError) flatten axes must be consecutive
  """
  @spec flatten(tensor_or_number, keyword()) :: tensor
  def flatten(tensor, opts \\ []) do
    opts = Core.options!(opts, axes: nil)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    dims = Tuple.to_list(shape)

    new_dims =
      case opts[:axes] do
        nil ->
          [product(dims)]

        [] ->
          dims

        axes ->
          [first | _] = axes = normalize_axes!(axes, shape)

          if axes != Enum.to_list(first..(first + length(axes) - 1)) do
            raise ArgumentError, "flatten axes must be consecutive"
          end

          {before, rest} = Enum.split(dims, first)
          {merged, after_} = Enum.split(rest, length(axes))
          before ++ [product(merged)] ++ after_
      end

    reshape(t, List.to_tuple(new_dims))
  end

  @doc """
  Repeats the tensor `repetitions` times along each axis. The repetitions
  apply from the last axis; extra repetitions add leading axes.

  ## Examples

      iex> Emily.Tensor.tile(Emily.Tensor.tensor([0, 1, 2]), [2, 2])
      #Emily.Tensor<
        s32[2][6]
        [
          [0, 1, 2, 0, 1, 2],
          [0, 1, 2, 0, 1, 2]
        ]
      >

      iex> Emily.Tensor.tile(Emily.Tensor.tensor([[1, 2], [3, 4]]), [2, 1])
      #Emily.Tensor<
        s32[4][2]
        [
          [1, 2],
          [3, 4],
          [1, 2],
          [3, 4]
        ]
      >

      iex> Emily.Tensor.tile(Emily.Tensor.tensor([1, 2]), 1.0)
      ** (ArgumentError) repetitions must be a list of integers, got: 1.0
  """
  @spec tile(tensor_or_number, [pos_integer()]) :: tensor
  def tile(tensor, repetitions) do
    unless is_list(repetitions) and Enum.all?(repetitions, &(is_integer(&1) and &1 >= 1)) do
      raise ArgumentError, "repetitions must be a list of integers, got: #{inspect(repetitions)}"
    end

    t = Core.to_tensor(tensor)
    dims = Tuple.to_list(t.shape)
    n = max(length(dims), length(repetitions))
    dims = List.duplicate(1, n - length(dims)) ++ dims
    reps = List.duplicate(1, n - length(repetitions)) ++ repetitions

    interleaved = Enum.flat_map(dims, &[1, &1])
    target = reps |> Enum.zip(dims) |> Enum.flat_map(fn {r, d} -> [r, d] end)
    result = reps |> Enum.zip(dims) |> Enum.map(fn {r, d} -> r * d end)

    ref =
      t.ref
      |> Native.reshape(interleaved)
      |> Native.broadcast_to(target)
      |> Native.reshape(result)

    Core.wrap(ref)
  end

  # ---------------------------------------------------------------------------
  # broadcast, transpose, reverse
  # ---------------------------------------------------------------------------

  @doc """
  Broadcasts a tensor to `shape` (a tuple, or a tensor whose shape is
  taken).

  By default the tensor's axes align with the last axes of `shape`. The
  `:axes` option maps each axis of the tensor to an axis of `shape`
  instead (in increasing order); every mapped dimension must be 1 or equal.

  ## Options

    * `:axes` - the axis of `shape` each tensor axis maps to
    * `:names` - only `nil` names are accepted

  ## Examples

      iex> Emily.Tensor.broadcast(1, {1, 2, 3})
      #Emily.Tensor<
        s32[1][2][3]
        [
          [
            [1, 1, 1],
            [1, 1, 1]
          ]
        ]
      >

      iex> Emily.Tensor.broadcast(Emily.Tensor.tensor([1, 2, 3]), {3, 2}, axes: [0])
      #Emily.Tensor<
        s32[3][2]
        [
          [1, 1],
          [2, 2],
          [3, 3]
        ]
      >

      iex> Emily.Tensor.broadcast(Emily.Tensor.tensor([1, 2, 3]), {2, 2})
      ** (ArgumentError) cannot broadcast tensor of dimensions {3} to {2, 2} with axes [1]
  """
  @spec broadcast(tensor_or_number, tuple() | tensor_or_number, keyword()) :: tensor
  def broadcast(tensor, shape, opts \\ []) do
    opts = Core.options!(opts, axes: nil, names: nil)
    %Emily.Tensor{shape: old} = t = Core.to_tensor(tensor)
    new = shape_arg!(shape, :positive)
    no_names!(opts[:names], tuple_size(new))
    old_rank = tuple_size(old)
    new_rank = tuple_size(new)

    axes =
      case opts[:axes] do
        nil ->
          if old_rank > new_rank do
            raise ArgumentError,
                  "cannot broadcast tensor of dimensions #{inspect(old)} to #{inspect(new)}"
          end

          Enum.to_list((new_rank - old_rank)..(new_rank - 1)//1)

        axes ->
          normalize_axes!(axes, new)
      end

    if length(axes) != old_rank do
      raise ArgumentError,
            "expected length of axes (#{length(axes)}) to match rank of shape (#{old_rank})"
    end

    axes
    |> Enum.reduce(-1, fn axis, last ->
      if axis < last,
        do: raise(ArgumentError, "broadcast axes must be ordered, got #{axis} after #{last}")

      axis
    end)

    ok =
      old_rank <= new_rank and
        axes
        |> Enum.with_index()
        |> Enum.all?(fn {axis, i} -> elem(old, i) in [1, elem(new, axis)] end)

    unless ok do
      raise ArgumentError,
            "cannot broadcast tensor of dimensions #{inspect(old)} to #{inspect(new)} " <>
              "with axes #{inspect(axes)}"
    end

    cond do
      old == new and opts[:axes] == nil ->
        t

      true ->
        mapped = Map.new(Enum.with_index(axes), fn {axis, i} -> {axis, elem(old, i)} end)
        lifted = for i <- 0..(new_rank - 1)//1, do: Map.get(mapped, i, 1)

        t.ref
        |> Native.reshape(lifted)
        |> Native.broadcast_to(Tuple.to_list(new))
        |> Core.wrap()
    end
  end

  @doc """
  Permutes the axes of a tensor: axis `i` of the result is axis
  `axes[i]` of the input. By default the axes are reversed.

  ## Options

    * `:axes` - the permutation

  ## Examples

      iex> Emily.Tensor.transpose(Emily.Tensor.iota({2, 3}))
      #Emily.Tensor<
        s32[3][2]
        [
          [0, 3],
          [1, 4],
          [2, 5]
        ]
      >

      iex> Emily.Tensor.transpose(Emily.Tensor.iota({2, 3, 4}), axes: [2, 1, 0]) |> Emily.Tensor.shape()
      {4, 3, 2}

      iex> Emily.Tensor.transpose(Emily.Tensor.iota({2, 2}), axes: [0])
      ** (ArgumentError) expected length of permutation (1) to match rank of shape (2)
  """
  @spec transpose(tensor_or_number, keyword()) :: tensor
  def transpose(tensor, opts \\ []) do
    opts = Core.options!(opts, axes: nil)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    rank = tuple_size(shape)

    axes =
      case opts[:axes] do
        nil -> Enum.to_list((rank - 1)..0//-1)
        axes -> normalize_axes!(axes, shape)
      end

    if length(axes) != rank do
      raise ArgumentError,
            "expected length of permutation (#{length(axes)}) to match rank of shape (#{rank})"
    end

    if axes == Enum.to_list(0..(rank - 1)//1),
      do: t,
      else: Core.wrap(Native.transpose(t.ref, axes))
  end

  @doc """
  Reverses the order of the elements along the given axes (all by
  default).

  ## Options

    * `:axes` - the axes to reverse

  ## Examples

      iex> Emily.Tensor.reverse(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      #Emily.Tensor<
        s32[2][3]
        [
          [6, 5, 4],
          [3, 2, 1]
        ]
      >

      iex> Emily.Tensor.reverse(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), axes: [1])
      #Emily.Tensor<
        s32[2][3]
        [
          [3, 2, 1],
          [6, 5, 4]
        ]
      >
  """
  @spec reverse(tensor_or_number, keyword()) :: tensor
  def reverse(tensor, opts \\ []) do
    opts = Core.options!(opts, axes: nil)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    axes = normalize_axes!(opts[:axes] || Enum.to_list(0..(tuple_size(shape) - 1)//1), shape)
    if axes == [], do: t, else: Core.wrap(Native.reverse(t.ref, Enum.sort(axes)))
  end

  # ---------------------------------------------------------------------------
  # pad
  # ---------------------------------------------------------------------------

  @doc """
  Pads each axis of `tensor` by `{low, high}` elements, with a scalar
  `pad_value` or with values taken from the tensor itself:

    * a number or scalar tensor - a constant (`pad/3` with no interior
      padding; negative amounts crop)
    * `:cyclic` - the tensor repeats (`[1, 2, 3]` → `… 2, 3 | 1, 2, 3 | 1, 2 …`)
    * `:reflect` - reflection without repeating the edge (`… 3, 2 | 1, 2, 3 | 2, 1 …`)
    * `:mirror` - reflection repeating the edge (`… 2, 1 | 1, 2, 3 | 3, 2 …`)
    * `:replicate` - the edge value repeats (`… 1, 1 | 1, 2, 3 | 3, 3 …`)

  The modes take non-negative `{low, high}` pairs (one per axis) and may
  pad by more than the axis size (the pattern continues periodically).

  ## Examples

      iex> Emily.Tensor.pad_outer(Emily.Tensor.iota({2, 3}), 0, [{1, 1}, {0, 2}])
      #Emily.Tensor<
        s32[4][5]
        [
          [0, 0, 0, 0, 0],
          [0, 1, 2, 0, 0],
          [3, 4, 5, 0, 0],
          [0, 0, 0, 0, 0]
        ]
      >

      iex> Emily.Tensor.pad_outer(Emily.Tensor.iota({2, 3}), :reflect, [{1, 1}, {0, 2}])
      #Emily.Tensor<
        s32[4][5]
        [
          [3, 4, 5, 4, 3],
          [0, 1, 2, 1, 0],
          [3, 4, 5, 4, 3],
          [0, 1, 2, 1, 0]
        ]
      >

      iex> Emily.Tensor.pad_outer(Emily.Tensor.tensor([1, 2, 3]), :cyclic, [{2, 2}])
      #Emily.Tensor<
        s32[7]
        [2, 3, 1, 2, 3, 1, 2]
      >

      iex> Emily.Tensor.pad_outer(Emily.Tensor.tensor([1, 2, 3]), :mirror, [{2, 2}])
      #Emily.Tensor<
        s32[7]
        [2, 1, 1, 2, 3, 3, 2]
      >

      iex> Emily.Tensor.pad_outer(Emily.Tensor.tensor([1.0, 2.0, 3.0]), :replicate, [{2, 1}])
      #Emily.Tensor<
        f32[6]
        [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]
      >
  """
  def pad_outer(tensor, pad_value, padding_config) when is_list(padding_config) do
    t = Core.to_tensor(tensor)
    rank = tuple_size(t.shape)

    unless length(padding_config) == rank and
             Enum.all?(
               padding_config,
               &match?({lo, hi} when is_integer(lo) and is_integer(hi), &1)
             ) do
      raise ArgumentError,
            "expected padding_config to have one {low, high} integer pair per axis " <>
              "of a rank #{rank} tensor, got: #{inspect(padding_config)}"
    end

    case pad_value do
      mode when mode in [:cyclic, :reflect, :mirror, :replicate] ->
        padding_config
        |> Enum.with_index()
        |> Enum.reduce(t, fn {{lo, hi}, axis}, acc -> pad_axis_mode(acc, mode, axis, lo, hi) end)

      mode when is_atom(mode) ->
        raise ArgumentError,
              "expected pad_value to be a scalar or one of :cyclic, :reflect, :mirror, " <>
                ":replicate, got: #{inspect(mode)}"

      value ->
        pad(t, value, Enum.map(padding_config, fn {lo, hi} -> {lo, hi, 0} end))
    end
  end

  def pad_outer(_tensor, _pad_value, padding_config) do
    raise ArgumentError,
          "expected padding_config to be a list of {low, high} pairs, got: #{inspect(padding_config)}"
  end

  defp pad_axis_mode(t, _mode, _axis, 0, 0), do: t

  defp pad_axis_mode(t, mode, axis, lo, hi) do
    n = elem(t.shape, axis)

    if lo < 0 or hi < 0 do
      raise ArgumentError,
            "pad_outer with #{inspect(mode)} expects non-negative padding, got: #{inspect({lo, hi})} " <>
              "for axis #{axis}"
    end

    if n == 0 do
      raise ArgumentError, "pad_outer with #{inspect(mode)} cannot pad the empty axis #{axis}"
    end

    indices = for i <- -lo..(n + hi - 1)//1, do: outer_source(mode, i, n)
    Emily.Tensor.take(t, Emily.Tensor.tensor(indices, type: :s32), axis: axis)
  end

  defp outer_source(:cyclic, i, n), do: Integer.mod(i, n)
  defp outer_source(:replicate, i, n), do: i |> max(0) |> min(n - 1)
  defp outer_source(:reflect, _i, 1), do: 0

  defp outer_source(:reflect, i, n) do
    j = Integer.mod(i, 2 * n - 2)
    if j < n, do: j, else: 2 * n - 2 - j
  end

  defp outer_source(:mirror, i, n) do
    j = Integer.mod(i, 2 * n)
    if j < n, do: j, else: 2 * n - 1 - j
  end

  @doc """
  Pads a tensor with `pad_value`.

  `padding_config` has one `{low, high, interior}` per axis: `low` values
  before the elements, `high` after, and `interior` between neighbours.
  Negative `low`/`high` remove elements from that edge (after interior
  padding); `interior` must be >= 0. The result type merges the tensor's
  type with the pad value's (as Nx's binary ops do).

  ## Examples

      iex> Emily.Tensor.pad(Emily.Tensor.tensor([1, 2, 3]), 0, [{1, 1, 0}])
      #Emily.Tensor<
        s32[5]
        [0, 1, 2, 3, 0]
      >

      iex> Emily.Tensor.pad(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), 0, [{0, 0, 1}, {0, 0, 1}])
      #Emily.Tensor<
        s32[3][5]
        [
          [1, 0, 2, 0, 3],
          [0, 0, 0, 0, 0],
          [4, 0, 5, 0, 6]
        ]
      >

      iex> Emily.Tensor.pad(Emily.Tensor.tensor([0, 1, 2, 3, 0]), 0, [{-1, -1, 0}])
      #Emily.Tensor<
        s32[3]
        [1, 2, 3]
      >

      iex> t = Emily.Tensor.tensor([[0, 1, 2], [3, 4, 5]], type: :f32)
      iex> Emily.Tensor.pad(t, 0, [{-1, 2, 0}, {1, -1, 0}])
      #Emily.Tensor<
        f32[3][3]
        [
          [0.0, 3.0, 4.0],
          [0.0, 0.0, 0.0],
          [0.0, 0.0, 0.0]
        ]
      >
  """
  @spec pad(tensor_or_number, tensor_or_number, [{integer(), integer(), non_neg_integer()}]) ::
          tensor
  def pad(tensor, pad_value, padding_config) when is_list(padding_config) do
    t = Core.to_tensor(tensor)
    type = binary_type(t, pad_value)
    value = Core.to_tensor(pad_value)

    if value.shape != {} do
      raise ArgumentError, "padding value must be a scalar and non-vectorized"
    end

    if length(padding_config) != tuple_size(t.shape) do
      raise ArgumentError,
            "invalid padding configuration, rank of padding configuration and shape must match"
    end

    {low, high, interior} =
      padding_config
      |> Enum.with_index()
      |> Enum.map(fn
        {{lo, hi, int}, i} when is_integer(lo) and is_integer(hi) and is_integer(int) ->
          if int < 0 do
            raise ArgumentError,
                  "interior padding must be greater than or equal to 0, got #{int} for axis #{i}"
          end

          d = elem(t.shape, i)

          if d + max(d - 1, 0) * int + lo + hi < 0 do
            raise ArgumentError,
                  "invalid padding configuration #{inspect({lo, hi, int})} for axis #{i} " <>
                    "of size #{d}: the padded size would be negative"
          end

          {lo, hi, int}

        {other, _} ->
          raise ArgumentError,
                "padding configuration must be a list of {low, high, interior} integer " <>
                  "tuples, got: #{inspect(other)}"
      end)
      |> unzip3()

    t = Core.cast(t, type)
    value = Core.cast(value, type)
    Core.wrap(Native.pad(t.ref, value.ref, low, high, interior))
  end

  # ---------------------------------------------------------------------------
  # concatenate, stack, split
  # ---------------------------------------------------------------------------

  @doc """
  Joins tensors along `:axis`. Takes a list or a tuple (nested tuples and
  lists are flattened); all tensors must have the same rank and the same
  dimensions except along the axis. Types are merged.

  ## Options

    * `:axis` - the axis to join along (default 0)

  ## Examples

      iex> Emily.Tensor.concatenate([Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([4, 5, 6])])
      #Emily.Tensor<
        s32[6]
        [1, 2, 3, 4, 5, 6]
      >

      iex> t1 = Emily.Tensor.iota({1, 3, 2})
      iex> t2 = Emily.Tensor.iota({1, 1, 2}, type: :f32)
      iex> Emily.Tensor.concatenate({t1, t2}, axis: 1)
      #Emily.Tensor<
        f32[1][4][2]
        [
          [
            [0.0, 1.0],
            [2.0, 3.0],
            [4.0, 5.0],
            [0.0, 1.0]
          ]
        ]
      >

      iex> Emily.Tensor.concatenate([Emily.Tensor.iota({1, 2, 3}), Emily.Tensor.iota({1, 1, 3})])
      ** (ArgumentError) expected all shapes to match {*, 2, 3}, got unmatching shape: {1, 1, 3}
  """
  @spec concatenate([tensor_or_number] | tuple(), keyword()) :: tensor
  def concatenate(tensors, opts \\ []) do
    opts = Core.options!(opts, axis: 0)

    case flatten_container(tensors) do
      [] ->
        raise ArgumentError, "no tensors were given to concatenate"

      [t] ->
        t

      [first | _] = ts ->
        axis = Core.axis!(opts[:axis], tuple_size(first.shape))
        template = put_elem(first.shape, axis, :*)

        for t <- ts,
            tuple_size(t.shape) != tuple_size(first.shape) or
              put_elem(t.shape, axis, :*) != template do
          raise ArgumentError,
                "expected all shapes to match #{shape_template(template)}, " <>
                  "got unmatching shape: #{inspect(t.shape)}"
        end

        join(ts, axis)
    end
  end

  @doc """
  Stacks tensors of the same shape along a new axis `:axis`. Takes a list
  or a tuple; types are merged.

  ## Options

    * `:axis` - the position of the new axis (default 0)
    * `:name` - only `nil` is accepted

  ## Examples

      iex> Emily.Tensor.stack([1, 2, 3])
      #Emily.Tensor<
        s32[3]
        [1, 2, 3]
      >

      iex> Emily.Tensor.stack([Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([4, 5, 6])], axis: -1)
      #Emily.Tensor<
        s32[3][2]
        [
          [1, 4],
          [2, 5],
          [3, 6]
        ]
      >
  """
  @spec stack([tensor_or_number] | tuple(), keyword()) :: tensor
  def stack(tensors, opts \\ []) do
    opts = Core.options!(opts, axis: 0, name: nil)
    no_names!(if(opts[:name], do: [opts[:name]]), 1)

    case flatten_container(tensors) do
      [] ->
        raise ArgumentError, "no tensors were given to stack"

      [t] ->
        new_axis(t, opts[:axis])

      [first | _] = ts ->
        for t <- ts, t.shape != first.shape do
          raise ArgumentError,
                "expected all shapes to match #{inspect(first.shape)}, " <>
                  "got unmatching shape: #{inspect(t.shape)}"
        end

        axis = Core.axis!(opts[:axis], tuple_size(first.shape) + 1)
        ts |> Enum.map(&new_axis(&1, axis)) |> join(axis)
    end
  end

  @doc """
  Splits a tensor in two along `:axis` and returns `{left, right}`.

  `split` is an integer index (negative counts from the end) or a float
  fraction of the axis size (rounded up). Neither part may be empty.

  ## Options

    * `:axis` - the axis to split (default 0)

  ## Examples

      iex> t = Emily.Tensor.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
      iex> {left, right} = Emily.Tensor.split(t, 2)
      iex> left
      #Emily.Tensor<
        s32[2][4]
        [
          [0, 1, 2, 3],
          [4, 5, 6, 7]
        ]
      >
      iex> right
      #Emily.Tensor<
        s32[1][4]
        [
          [8, 9, 10, 11]
        ]
      >
      iex> {left, _right} = Emily.Tensor.split(t, 0.75, axis: 1)
      iex> Emily.Tensor.shape(left)
      {3, 3}
  """
  @spec split(tensor_or_number, number(), keyword()) :: {tensor, tensor}
  def split(tensor, split, opts \\ []) do
    opts = Core.options!(opts, axis: 0)
    t = Core.to_tensor(tensor)
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    size = elem(t.shape, axis)

    {index, rest} =
      cond do
        is_integer(split) and split > 0 and split < size ->
          {split, size - split}

        is_integer(split) and split < 0 and split > -size ->
          {size + split, -split}

        is_integer(split) ->
          raise ArgumentError,
                "split must be an integer greater than zero and less than the length of the given axis"

        is_float(split) and ceil(split * size) > 0 and ceil(split * size) < size ->
          index = ceil(split * size)
          {index, size - index}

        is_float(split) ->
          raise ArgumentError,
                "split must be a float such that 0 < split and ceil(split * axis_size) < 1"

        true ->
          raise ArgumentError,
                "invalid split received, expected a float or an integer, got: #{inspect(split)}"
      end

    {slice_along_axis(t, 0, index, axis: axis), slice_along_axis(t, index, rest, axis: axis)}
  end

  # ---------------------------------------------------------------------------
  # slice, put_slice, slice_along_axis
  # ---------------------------------------------------------------------------

  @doc """
  Slices `lengths` elements per axis starting at `start_indices`.

  Start indices are integers or integer scalar tensors. A start that would
  make the slice overflow its axis is clamped so the slice has the
  requested length (for tensors too, at evaluation). With `:strides` the
  result keeps every stride-th element of the slice.

  ## Options

    * `:strides` - an integer for every axis, or one per axis (default 1)

  ## Examples

      iex> Emily.Tensor.slice(Emily.Tensor.tensor([1, 2, 3, 4, 5, 6]), [0], [6], strides: [2])
      #Emily.Tensor<
        s32[3]
        [1, 3, 5]
      >

      iex> Emily.Tensor.slice(Emily.Tensor.iota({2, 15, 30}), [0, 4, 11], [2, 3, 9], strides: [2, 1, 3])
      #Emily.Tensor<
        s32[1][3][3]
        [
          [
            [131, 134, 137],
            [161, 164, 167],
            [191, 194, 197]
          ]
        ]
      >

      iex> Emily.Tensor.slice(Emily.Tensor.iota({3, 3}), [Emily.Tensor.tensor(2), Emily.Tensor.tensor(2)], [2, 2])
      #Emily.Tensor<
        s32[2][2]
        [
          [4, 5],
          [7, 8]
        ]
      >
  """
  @spec slice(tensor_or_number, [integer() | tensor], [pos_integer()], keyword()) :: tensor
  def slice(tensor, start_indices, lengths, opts \\ [])
      when is_list(start_indices) and is_list(lengths) and is_list(opts) do
    opts = Core.options!(opts, strides: 1)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    rank = tuple_size(shape)

    if shape == {} and start_indices == [] and lengths == [] do
      t
    else
      strides =
        if is_integer(opts[:strides]),
          do: List.duplicate(opts[:strides], rank),
          else: opts[:strides]

      cond do
        not is_list(strides) or length(strides) != rank ->
          raise ArgumentError, "invalid strides rank for shape of rank #{rank}"

        length(start_indices) != rank ->
          raise ArgumentError, "invalid start indices rank for shape of rank #{rank}"

        length(lengths) != rank ->
          raise ArgumentError, "invalid limit indices rank for shape of rank #{rank}"

        true ->
          :ok
      end

      for {{len, s}, i} <- Enum.with_index(Enum.zip(lengths, strides)) do
        dim = elem(shape, i)

        cond do
          not is_integer(len) or len < 1 ->
            raise ArgumentError,
                  "length at axis #{i} must be greater than or equal to 1, got: #{inspect(len)}"

          not is_integer(s) or s < 1 ->
            raise ArgumentError,
                  "stride at axis #{i} must be greater than or equal to 1, got: #{inspect(s)}"

          len > dim ->
            raise ArgumentError,
                  "length at axis #{i} must be less than axis size of #{dim}, got: #{len}"

          true ->
            :ok
        end
      end

      starts = indices!(start_indices)

      if Enum.all?(starts, &is_integer/1) do
        starts =
          Enum.zip_with([starts, lengths, Tuple.to_list(shape)], fn [s, len, dim] ->
            clamp(s, dim - len)
          end)

        stops = Enum.zip_with(starts, lengths, &(&1 + &2))
        Core.wrap(Native.slice(t.ref, starts, stops, strides))
      else
        Core.wrap(Native.dynamic_slice(t.ref, starts_ref(starts), lengths, strides))
      end
    end
  end

  @doc """
  Slices `len` elements along `:axis` from `start_index` (an integer or
  an integer scalar tensor), keeping the other axes whole.

  ## Options

    * `:axis` - the axis to slice (default 0)
    * `:strides` - the stride along that axis (default 1)

  ## Examples

      iex> Emily.Tensor.slice_along_axis(Emily.Tensor.iota({5, 2}), 1, 2, axis: 0)
      #Emily.Tensor<
        s32[2][2]
        [
          [2, 3],
          [4, 5]
        ]
      >

      iex> Emily.Tensor.slice_along_axis(Emily.Tensor.iota({2, 5}), 0, 3, axis: -1, strides: 2)
      #Emily.Tensor<
        s32[2][2]
        [
          [0, 2],
          [5, 7]
        ]
      >
  """
  @spec slice_along_axis(tensor_or_number, integer() | tensor, pos_integer(), keyword()) :: tensor
  def slice_along_axis(tensor, start_index, len, opts \\ []) when is_integer(len) do
    opts = Core.options!(opts, strides: 1, axis: 0)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    rank = tuple_size(shape)
    axis = Core.axis!(opts[:axis], rank)

    if start_index == 0 and opts[:strides] == 1 and elem(shape, axis) == len do
      t
    else
      starts = List.duplicate(0, rank) |> List.replace_at(axis, start_index)
      lengths = shape |> put_elem(axis, len) |> Tuple.to_list()
      strides = List.duplicate(1, rank) |> List.replace_at(axis, opts[:strides])
      slice(t, starts, lengths, strides: strides)
    end
  end

  @doc """
  Writes `slice` into `tensor` at `start_indices` (integers or integer
  scalar tensors). Starts are clamped so the whole slice fits. The result
  type merges both types.

  ## Examples

      iex> Emily.Tensor.put_slice(Emily.Tensor.tensor([0, 1, 2, 3, 4]), [2], Emily.Tensor.tensor([5, 6]))
      #Emily.Tensor<
        s32[5]
        [0, 1, 5, 6, 4]
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.put_slice(t, [Emily.Tensor.tensor(0), Emily.Tensor.tensor(1)], Emily.Tensor.tensor([[10.0, 11.0]]))
      #Emily.Tensor<
        f32[2][3]
        [
          [1.0, 10.0, 11.0],
          [4.0, 5.0, 6.0]
        ]
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.put_slice(t, [1, 1], Emily.Tensor.tensor([[7, 8], [9, 10]]))
      #Emily.Tensor<
        s32[2][3]
        [
          [1, 7, 8],
          [4, 9, 10]
        ]
      >
  """
  @spec put_slice(tensor_or_number, [integer() | tensor], tensor_or_number) :: tensor
  def put_slice(tensor, start_indices, slice) when is_list(start_indices) do
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    %Emily.Tensor{shape: slice_shape} = s = Core.to_tensor(slice)
    rank = tuple_size(shape)
    type = Type.merge(t.type, s.type)

    if length(start_indices) != rank do
      raise ArgumentError, "invalid start indices rank for shape of rank #{rank}"
    end

    if tuple_size(slice_shape) != rank do
      raise ArgumentError,
            "invalid slice for put_slice, rank of slice must match #{rank}, " <>
              "got: #{tuple_size(slice_shape)}"
    end

    if Enum.any?(Enum.zip(Tuple.to_list(shape), Tuple.to_list(slice_shape)), fn {d, sd} ->
         sd > d
       end) do
      raise ArgumentError,
            "slice shape #{inspect(slice_shape)} must be less than or equal to " <>
              "tensor shape #{inspect(shape)}"
    end

    starts = indices!(start_indices)
    t = Core.cast(t, type)
    s = Core.cast(s, type)

    if Enum.all?(starts, &is_integer/1) do
      starts =
        Enum.zip_with([starts, Tuple.to_list(slice_shape), Tuple.to_list(shape)], fn [st, sd, d] ->
          clamp(st, d - sd)
        end)

      Core.wrap(Native.put_slice(t.ref, starts, s.ref))
    else
      Core.wrap(Native.dynamic_put_slice(t.ref, starts_ref(starts), s.ref))
    end
  end

  # ---------------------------------------------------------------------------
  # diagonals
  # ---------------------------------------------------------------------------

  @doc """
  The diagonal of the last two axes (batched over the leading axes).
  `:offset` > 0 takes a diagonal above the main one, < 0 below.

  ## Options

    * `:offset` - the diagonal (default 0)

  ## Examples

      iex> Emily.Tensor.take_diagonal(Emily.Tensor.tensor([[0, 1, 2], [3, 4, 5], [6, 7, 8]]))
      #Emily.Tensor<
        s32[3]
        [0, 4, 8]
      >

      iex> Emily.Tensor.take_diagonal(Emily.Tensor.iota({3, 3}), offset: -1)
      #Emily.Tensor<
        s32[2]
        [3, 7]
      >

      iex> Emily.Tensor.take_diagonal(Emily.Tensor.iota({3, 2, 2}))
      #Emily.Tensor<
        s32[3][2]
        [
          [0, 3],
          [4, 7],
          [8, 11]
        ]
      >

      iex> Emily.Tensor.take_diagonal(Emily.Tensor.tensor([0, 1, 2]))
      ** (ArgumentError) take_diagonal/2 expects tensor of rank 2 or higher, got tensor of rank: 1
  """
  @spec take_diagonal(tensor_or_number, keyword()) :: tensor
  def take_diagonal(tensor, opts \\ []) do
    opts = Core.options!(opts, offset: 0)
    %Emily.Tensor{shape: shape} = t = Core.to_tensor(tensor)
    rank = tuple_size(shape)

    if rank < 2 do
      raise ArgumentError,
            "take_diagonal/2 expects tensor of rank 2 or higher, got tensor of rank: #{rank}"
    end

    {batch, [m, n]} = Enum.split(Tuple.to_list(shape), -2)
    offset = opts[:offset]
    validate_diag_offset!(m, n, offset)
    {len, start} = diagonal_span(m, n, offset)

    # In the flattened matrix the diagonal is every (n + 1)-th element.
    flat = Native.reshape(t.ref, batch ++ [m * n])
    b = length(batch)
    starts = List.duplicate(0, b) ++ [start]
    stops = batch ++ [start + (len - 1) * (n + 1) + 1]
    strides = List.duplicate(1, b) ++ [n + 1]
    Core.wrap(Native.slice(flat, starts, stops, strides))
  end

  @doc """
  A square matrix with the 1-D `tensor` on diagonal `:offset` and zeros
  elsewhere; its size is the length plus `abs(offset)`.

  ## Options

    * `:offset` - the diagonal (default 0)

  ## Examples

      iex> Emily.Tensor.make_diagonal(Emily.Tensor.tensor([1, 2, 3, 4]))
      #Emily.Tensor<
        s32[4][4]
        [
          [1, 0, 0, 0],
          [0, 2, 0, 0],
          [0, 0, 3, 0],
          [0, 0, 0, 4]
        ]
      >

      iex> Emily.Tensor.make_diagonal(Emily.Tensor.tensor([1, 2, 3]), offset: -1)
      #Emily.Tensor<
        s32[4][4]
        [
          [0, 0, 0, 0],
          [1, 0, 0, 0],
          [0, 2, 0, 0],
          [0, 0, 3, 0]
        ]
      >

      iex> Emily.Tensor.make_diagonal(Emily.Tensor.tensor([[0, 0], [0, 1]]))
      ** (ArgumentError) make_diagonal/2 expects tensor of rank 1, got tensor of rank: 2
  """
  @spec make_diagonal(tensor_or_number, keyword()) :: tensor
  def make_diagonal(tensor, opts \\ []) do
    opts = Core.options!(opts, offset: 0)
    t = Core.to_tensor(tensor)

    case t.shape do
      {len} ->
        offset = opts[:offset]
        size = len + abs(offset)
        start = if offset >= 0, do: offset, else: -offset * size
        zero = Core.to_tensor(0, t.type)

        t.ref
        |> flat_diagonal(zero.ref, start, len, size, size * size)
        |> Native.reshape([size, size])
        |> Core.wrap()

      shape ->
        raise ArgumentError,
              "make_diagonal/2 expects tensor of rank 1, got tensor of rank: #{tuple_size(shape)}"
    end
  end

  @doc """
  Writes the 1-D `diagonal` onto diagonal `:offset` of the 2-D `tensor`.
  The diagonal's length must be the diagonal's length in the tensor. The
  result type merges both types.

  ## Options

    * `:offset` - the diagonal (default 0)

  ## Examples

      iex> Emily.Tensor.put_diagonal(Emily.Tensor.broadcast(0, {4, 3}), Emily.Tensor.tensor([1, 2, 3]))
      #Emily.Tensor<
        s32[4][3]
        [
          [1, 0, 0],
          [0, 2, 0],
          [0, 0, 3],
          [0, 0, 0]
        ]
      >

      iex> Emily.Tensor.put_diagonal(Emily.Tensor.broadcast(0, {4, 4}), Emily.Tensor.tensor([1, 2, 3]), offset: 1)
      #Emily.Tensor<
        s32[4][4]
        [
          [0, 1, 0, 0],
          [0, 0, 2, 0],
          [0, 0, 0, 3],
          [0, 0, 0, 0]
        ]
      >

      iex> Emily.Tensor.put_diagonal(Emily.Tensor.iota({3, 3}), Emily.Tensor.iota({2}))
      ** (ArgumentError) expected diagonal tensor of length: 3, got diagonal tensor of length: 2
  """
  @spec put_diagonal(tensor_or_number, tensor_or_number, keyword()) :: tensor
  def put_diagonal(tensor, diagonal, opts \\ []) do
    opts = Core.options!(opts, offset: 0)
    t = Core.to_tensor(tensor)
    d = Core.to_tensor(diagonal)
    offset = opts[:offset]

    {m, n} =
      case t.shape do
        {m, n} ->
          {m, n}

        shape ->
          raise ArgumentError,
                "put_diagonal/3 expects tensor of rank 2, got tensor of rank: #{tuple_size(shape)}"
      end

    given =
      case d.shape do
        {given} ->
          given

        shape ->
          raise ArgumentError,
                "put_diagonal/3 expects diagonal of rank 1, got tensor of rank: #{tuple_size(shape)}"
      end

    validate_diag_offset!(m, n, offset)
    {len, start} = diagonal_span(m, n, offset)

    if len != given do
      raise ArgumentError,
            "expected diagonal tensor of length: #{len}, got diagonal tensor of length: #{given}"
    end

    type = Type.merge(t.type, d.type)
    t = Core.cast(t, type)
    d = Core.cast(d, type)
    zero = Core.to_tensor(0, type)
    values = d.ref |> flat_diagonal(zero.ref, start, len, n, m * n) |> Native.reshape([m, n])

    ones = Native.full(Native.scalar(<<1>>, {:pred, 8}), [len], {:pred, 8})
    no = Native.scalar(<<0>>, {:pred, 8})
    mask = ones |> flat_diagonal(no, start, len, n, m * n) |> Native.reshape([m, n])
    Core.wrap(Native.select(mask, values, t.ref))
  end

  # ---------------------------------------------------------------------------
  # dot, outer
  # ---------------------------------------------------------------------------

  @doc """
  The dot product of two tensors, following Nx's rules:

    * a scalar on either side multiplies;
    * a 1-D right side contracts the last axis of the left side with it
      (two vectors give their inner product);
    * otherwise the last axis of the left side (axis 0 if 1-D) contracts
      with the second-to-last axis of the right side (matrix product for
      matrices).

  The result type merges both types (integers stay integers).

  ## Examples

      iex> Emily.Tensor.dot(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([4, 5, 6]))
      #Emily.Tensor<
        s32
        32
      >

      iex> left = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> right = Emily.Tensor.tensor([[7, 8], [9, 10], [11, 12]])
      iex> Emily.Tensor.dot(left, right)
      #Emily.Tensor<
        s32[2][2]
        [
          [58, 64],
          [139, 154]
        ]
      >

      iex> Emily.Tensor.dot(Emily.Tensor.tensor([5, 10]), Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]))
      #Emily.Tensor<
        s32[3]
        [45, 60, 75]
      >

      iex> Emily.Tensor.dot(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([1, 2]))
      ** (ArgumentError) dot/zip expects shapes to be compatible, dimension 0 of left-side (3) does not equal dimension 0 of right-side (2)
  """
  @spec dot(tensor_or_number, tensor_or_number) :: tensor
  def dot(a, b) do
    ta = Core.to_tensor(a)
    tb = Core.to_tensor(b)

    case {tuple_size(ta.shape), tuple_size(tb.shape)} do
      {0, _} -> multiply(a, b)
      {_, 0} -> multiply(a, b)
      {n, 1} -> dot(a, [n - 1], [], b, [0], [])
      {1, m} -> dot(a, [0], [], b, [m - 2], [])
      {n, m} -> dot(a, [n - 1], [], b, [m - 2], [])
    end
  end

  @doc """
  The dot product contracting axes `contract_a` of `a` with `contract_b`
  of `b` (paired by position); the same as `dot/6` with no batch axes.

  ## Examples

      iex> t1 = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> t2 = Emily.Tensor.tensor([[10, 20], [30, 40]])
      iex> Emily.Tensor.dot(t1, [0], t2, [0])
      #Emily.Tensor<
        s32[2][2]
        [
          [100, 140],
          [140, 200]
        ]
      >

      iex> t1 = Emily.Tensor.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
      iex> t2 = Emily.Tensor.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
      iex> Emily.Tensor.dot(t1, [0, 1], t2, [1, 0])
      #Emily.Tensor<
        f32
        50.0
      >
  """
  @spec dot(tensor_or_number, [integer()], tensor_or_number, [integer()]) :: tensor
  def dot(a, contract_a, b, contract_b), do: dot(a, contract_a, [], b, contract_b, [])

  @doc """
  The general dot product: contracts `contract_a` of `a` with
  `contract_b` of `b`, batched over `batch_a`/`batch_b` (which must be
  the leading axes, in order, with equal sizes). The result's axes are the
  batch axes, then the free axes of `a`, then those of `b`. With no axes
  at all it is the outer product.

  ## Examples

      iex> u = Emily.Tensor.tensor([[[1, 1]], [[2, 2]]])
      iex> v = Emily.Tensor.tensor([[[3], [3]], [[4], [4]]])
      iex> Emily.Tensor.dot(u, [2], [0], v, [1], [0])
      #Emily.Tensor<
        s32[2][1][1]
        [
          [
            [6]
          ],
          [
            [16]
          ]
        ]
      >

      iex> u = Emily.Tensor.tensor([[[1, 1]], [[2, 2]]])
      iex> v = Emily.Tensor.tensor([[[3], [3]], [[4], [4]]])
      iex> Emily.Tensor.dot(u, [2], [1], v, [1], [0])
      ** (ArgumentError) invalid dot batch axis for the left tensor, batch axes must be successive dimensions starting from 0, got [1]
  """
  @spec dot(tensor_or_number, [integer()], [integer()], tensor_or_number, [integer()], [integer()]) ::
          tensor
  def dot(a, contract_a, batch_a, b, contract_b, batch_b) do
    type = binary_type(a, b)
    ta = Core.to_tensor(a)
    tb = Core.to_tensor(b)
    %Emily.Tensor{shape: s1} = ta
    %Emily.Tensor{shape: s2} = tb

    c1 = normalize_axes!(contract_a, s1)
    c2 = normalize_axes!(contract_b, s2)
    b1 = normalize_axes!(batch_a, s1)
    b2 = normalize_axes!(batch_b, s2)
    validate_dot!(s1, c1, b1, s2, c2, b2)

    ta = Core.cast(ta, type)
    tb = Core.cast(tb, type)

    if b1 == [] and tuple_size(s1) == 2 and tuple_size(s2) == 2 and c1 == [1] and c2 == [0] do
      Core.wrap(Emily.matmul(ta.ref, tb.ref))
    else
      Core.wrap(Native.dot(ta.ref, tb.ref, c1, c2, b1, b2))
    end
  end

  @doc """
  The outer product: every element of `a` (flattened) times every element
  of `b` (flattened, conjugated when the result is complex). Always 2-D.

  ## Examples

      iex> Emily.Tensor.outer(Emily.Tensor.tensor([1, 2, 3]), 100)
      #Emily.Tensor<
        s32[3][1]
        [
          [100],
          [200],
          [300]
        ]
      >

      iex> Emily.Tensor.outer(Emily.Tensor.tensor([[1, 2], [3, 4]]), Emily.Tensor.tensor([10, 20, 30]))
      #Emily.Tensor<
        s32[4][3]
        [
          [10, 20, 30],
          [20, 40, 60],
          [30, 60, 90],
          [40, 80, 120]
        ]
      >
  """
  @spec outer(tensor_or_number, tensor_or_number) :: tensor
  def outer(a, b) do
    type = binary_type(a, b)
    ta = a |> Core.to_tensor() |> Core.cast(type)
    tb = b |> Core.to_tensor() |> Core.cast(type)
    tb = if Type.complex?(type), do: conjugate(tb), else: tb
    lhs = Native.reshape(ta.ref, [tensor_size(ta), 1])
    rhs = Native.reshape(tb.ref, [1, tensor_size(tb)])
    Core.wrap(Native.multiply(lhs, rhs))
  end

  # ---------------------------------------------------------------------------
  # helpers
  # ---------------------------------------------------------------------------

  # The output type of a binary op on two tensors-or-numbers (Nx's rules).
  defp binary_type(%Emily.Tensor{type: a}, %Emily.Tensor{type: b}), do: Type.merge(a, b)
  defp binary_type(%Emily.Tensor{type: a}, b), do: Type.merge_number(a, b)
  defp binary_type(a, %Emily.Tensor{type: b}), do: Type.merge_number(b, a)
  defp binary_type(a, b), do: Type.merge(Type.infer(a), Type.infer(b))

  # Elementwise product with Nx's promotion (used by dot/2 on scalars;
  # Emily.Tensor.multiply lives in another module).
  defp multiply(a, b) do
    type = binary_type(a, b)
    ta = a |> Core.to_tensor() |> Core.cast(type)
    tb = b |> Core.to_tensor() |> Core.cast(type)
    Core.wrap(Native.multiply(ta.ref, tb.ref))
  end

  # conj(z) without a conjugate primitive: (re + (-z)) + re is exact
  # (re - re = 0 and 0 + re = re; the imaginary part is only negated).
  defp conjugate(%Emily.Tensor{type: type} = t) do
    if function_exported?(Native, :conjugate, 1) do
      Core.wrap(apply(Native, :conjugate, [t.ref]))
    else
      {:c, bits} = type
      re = t.ref |> Native.as_type({:f, div(bits, 2)}) |> Native.as_type(type)
      Core.wrap(Native.add(Native.add(re, Native.negate(t.ref)), re))
    end
  end

  defp tensor_size(%Emily.Tensor{shape: shape}), do: product(Tuple.to_list(shape))

  defp product(dims), do: Enum.reduce(dims, 1, &(&1 * &2))

  defp clamp(s, hi), do: s |> max(0) |> min(hi)

  defp unzip3(triples) do
    {Enum.map(triples, &elem(&1, 0)), Enum.map(triples, &elem(&1, 1)),
     Enum.map(triples, &elem(&1, 2))}
  end

  defp shape_template(template) do
    inner = template |> Tuple.to_list() |> Enum.map_join(", ", &to_string/1)
    "{#{inner}}"
  end

  # Flattens lists and tuples (nested) of tensors and numbers into tensors.
  defp flatten_container(list) when is_list(list), do: Enum.flat_map(list, &flatten_item/1)
  defp flatten_container(tuple) when is_tuple(tuple), do: flatten_container(Tuple.to_list(tuple))

  defp flatten_container(other),
    do: raise(ArgumentError, "expected a list or a tuple of tensors, got: #{inspect(other)}")

  defp flatten_item(x) when is_list(x) or is_tuple(x), do: flatten_container(x)
  defp flatten_item(x), do: [Core.to_tensor(x)]

  # Concatenates tensors of equal rank along `axis` after merging types.
  defp join(ts, axis) do
    type = ts |> Enum.map(& &1.type) |> Enum.reduce(&Type.merge/2)
    refs = Enum.map(ts, &Core.cast(&1, type).ref)
    Core.wrap(Native.concatenate(refs, axis))
  end

  # Validates start indices: integers, or integer scalar tensors.
  defp indices!(starts) do
    starts
    |> Enum.with_index()
    |> Enum.map(fn
      {s, _i} when is_integer(s) ->
        s

      {%Emily.Tensor{shape: {}, type: type} = t, i} ->
        unless Type.integer?(type) do
          raise ArgumentError, "index must be integer type, got #{inspect(type)} for axis #{i}"
        end

        t

      {%Emily.Tensor{shape: shape}, i} ->
        raise ArgumentError, "index must be scalar, got shape #{inspect(shape)} for axis #{i}"

      {other, i} ->
        raise ArgumentError,
              "start index must be an integer or an integer scalar tensor, " <>
                "got #{inspect(other)} for axis #{i}"
    end)
  end

  # A 1-D s64 engine tensor holding the starts (integers and scalar tensors).
  defp starts_ref(starts) do
    starts
    |> Enum.map(fn
      s when is_integer(s) -> Native.from_binary(<<s::signed-64-native>>, [1], {:s, 64})
      %Emily.Tensor{ref: ref} -> ref |> Native.as_type({:s, 64}) |> Native.reshape([1])
    end)
    |> Native.concatenate(0)
  end

  # Places the `len` elements of `ref` every (stride + 1) positions from
  # `start` in a flat vector of `total` elements filled with `fill`.
  defp flat_diagonal(ref, fill, start, len, stride, total) do
    used = (len - 1) * (stride + 1) + 1
    Native.pad(ref, fill, [start], [total - start - used], [stride])
  end

  # {length, flat start} of diagonal `offset` of an m x n matrix.
  defp diagonal_span(m, n, offset) when offset >= 0, do: {min(m, n - offset), offset}
  defp diagonal_span(m, n, offset), do: {min(m + offset, n), -offset * n}

  defp validate_diag_offset!(m, n, offset) do
    cond do
      not is_integer(offset) ->
        raise ArgumentError, "offset must be an integer, got: #{inspect(offset)}"

      offset >= 0 and offset >= n ->
        raise ArgumentError,
              "offset must be less than length of axis 1 when positive, got: #{offset}"

      offset < 0 and -offset >= m ->
        raise ArgumentError,
              "absolute value of offset must be less than length of axis 0 when negative, got: #{offset}"

      true ->
        :ok
    end
  end

  defp validate_dot!(s1, c1, b1, s2, c2, b2) do
    cond do
      b1 == [] and b2 != [] ->
        raise ArgumentError, "left tensor must be batched if right tensor is batched"

      b1 != [] and b2 == [] ->
        raise ArgumentError, "right tensor must be batched if left tensor is batched"

      b1 != [] and b1 != Enum.to_list(0..(length(b1) - 1)) ->
        raise ArgumentError,
              "invalid dot batch axis for the left tensor, batch axes must be successive " <>
                "dimensions starting from 0, got #{inspect(b1)}"

      b2 != [] and b2 != Enum.to_list(0..(length(b2) - 1)) ->
        raise ArgumentError,
              "invalid dot batch axis for the right tensor, batch axes must be successive " <>
                "dimensions starting from 0, got #{inspect(b2)}"

      Enum.map(b1, &elem(s1, &1)) != Enum.map(b2, &elem(s2, &1)) ->
        raise ArgumentError,
              "dot batch dimension sizes must match, but the left batch dimension of axes " <>
                "#{inspect(b1)} has dimension sizes #{inspect(Enum.map(b1, &elem(s1, &1)))} " <>
                "and the right batch dimension of axes #{inspect(b2)} has sizes " <>
                "#{inspect(Enum.map(b2, &elem(s2, &1)))}"

      Enum.any?(b1, &(&1 in c1)) ->
        raise ArgumentError,
              "dot batch axes for left tensor (#{inspect(b1)}) cannot be in contract axes " <>
                "(#{inspect(c1)})"

      Enum.any?(b2, &(&1 in c2)) ->
        raise ArgumentError,
              "dot batch axes for right tensor (#{inspect(b2)}) cannot be in contract axes " <>
                "(#{inspect(c2)})"

      length(c1) != length(c2) ->
        raise ArgumentError,
              "dot expects the same number of contract axes on both sides, " <>
                "got #{inspect(c1)} and #{inspect(c2)}"

      true ->
        nb = length(b1)

        for {a1, a2} <- Enum.zip(c1, c2), elem(s1, a1) != elem(s2, a2) do
          raise ArgumentError,
                "dot/zip expects shapes to be compatible, dimension #{a1 - nb} of left-side " <>
                  "(#{elem(s1, a1)}) does not equal dimension #{a2 - nb} of right-side " <>
                  "(#{elem(s2, a2)})"
        end

        :ok
    end
  end

  # Axes as Nx normalises them: integers (negative from the end), unique.
  defp normalize_axes!(axes, shape) when is_list(axes) do
    rank = tuple_size(shape)
    normalized = Enum.map(axes, &Core.axis!(&1, rank))

    if length(Enum.uniq(normalized)) != length(normalized) do
      raise ArgumentError,
            "axes #{inspect(axes)} must be unique integers between 0 and #{rank - 1}"
    end

    normalized
  end

  defp normalize_axes!(axes, _shape),
    do: raise(ArgumentError, "expected a list of axes, got: #{inspect(axes)}")

  # A shape given as a tuple, a tensor or a number. `mode` :auto accepts
  # one :auto entry (reshape); :positive requires dims >= 1.
  defp shape_arg!(%Emily.Tensor{shape: shape}, _mode), do: shape
  defp shape_arg!(x, _mode) when is_number(x) or is_struct(x, Emily.Complex), do: {}

  defp shape_arg!(shape, mode) when is_tuple(shape) do
    shape
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.each(fn
      {d, _} when is_integer(d) and d > 0 ->
        :ok

      {:auto, _} when mode == :auto ->
        :ok

      {d, i} ->
        raise ArgumentError,
              "invalid dimension in axis #{i} found in shape. Each dimension must be a " <>
                "positive integer, got #{inspect(d)} in shape #{inspect(shape)}"
    end)

    shape
  end

  defp shape_arg!(other, _mode) do
    raise ArgumentError,
          "expected a shape. A shape is a n-element tuple with the size of each dimension. " <>
            "Alternatively, you can pass a tensor (or a number) and the shape will be " <>
            "retrieved from the tensor. Got: #{inspect(other)}"
  end

  # Resolves :auto and checks the element count (Nx.Shape.reshape).
  defp resolve_shape!(old_shape, new_shape) do
    old_size = product(Tuple.to_list(old_shape))
    dims = Tuple.to_list(new_shape)

    new_shape =
      case Enum.filter(Enum.with_index(dims), fn {d, _} -> d == :auto end) do
        [] ->
          new_shape

        [{_, idx}] ->
          rest = Tuple.delete_at(new_shape, idx)
          inferred = div(old_size, product(Tuple.to_list(rest)))

          if inferred == 0 do
            raise ArgumentError,
                  "cannot reshape, current shape #{inspect(old_shape)} is not compatible with " <>
                    "new shape #{inspect(rest)}"
          end

          put_elem(new_shape, idx, inferred)

        _ ->
          raise ArgumentError, "only one :auto dimension is allowed, got: #{inspect(new_shape)}"
      end

    if product(Tuple.to_list(new_shape)) != old_size do
      raise ArgumentError,
            "cannot reshape, current shape #{inspect(old_shape)} is not compatible with " <>
              "new shape #{inspect(new_shape)}"
    end

    new_shape
  end

  # Emily has no named axes: names must be nil (or a list of nils).
  defp no_names!(nil, _rank), do: :ok

  defp no_names!(names, rank) when is_list(names) do
    cond do
      Enum.all?(names, &is_nil/1) and length(names) == rank ->
        :ok

      Enum.all?(names, &is_nil/1) ->
        raise ArgumentError,
              "invalid names for tensor of rank #{rank}, when specifying names every " <>
                "dimension must have a name or be nil"

      true ->
        raise ArgumentError,
              "named axes are not supported by Emily, got names: #{inspect(names)}"
    end
  end

  defp no_names!(names, _rank),
    do:
      raise(ArgumentError, "named axes are not supported by Emily, got names: #{inspect(names)}")
end
