defmodule Emily.Tensor.Window do
  @moduledoc """
  Window reductions and window scatters, as in Nx: `window_sum/3`,
  `window_product/3`, `window_max/3`, `window_min/3`, `window_mean/3`,
  `window_scatter_max/5` and `window_scatter_min/5`, plus
  `window_reduce/5` with a user function (run on the host).

  Every window function takes the window dimensions as a tuple with one
  entry per axis of the tensor and the options:

    * `:strides` — an integer or a list (one per axis); default 1
    * `:padding` — `:valid` (none, the default), `:same` (`k - 1` split as
      `{floor, ceil}` per axis, `k` the dilated window size) or a list of
      `{low, high}` per axis
    * `:window_dilations` — an integer or a list; default 1
      (`window_scatter_*` take only `:strides` and `:padding`)

  Padding holds the reduction's identity: 0 for sums, 1 for products, the
  lowest value (`-Infinity` for floats) for max and the highest for min.
  The engine never materialises it.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @doc """
  Sums over each window.

      iex> t = Emily.Tensor.tensor([[[1, 2, 3, 4], [4, 5, 6, 7], [7, 8, 9, 10], [11, 12, 13, 14]]])
      iex> Emily.Tensor.window_sum(t, {1, 2, 2}, strides: [1, 2, 1], padding: [{0, 0}, {0, 0}, {1, 0}])
      #Emily.Tensor<
        s32[1][2][4]
        [
          [
            [5, 12, 16, 20],
            [18, 38, 42, 46]
          ]
        ]
      >

  The output keeps the input type (integer sums wrap).
  """
  def window_sum(tensor, window_dimensions, opts \\ []),
    do: reduce(:sum, "window_sum", tensor, window_dimensions, opts)

  @doc """
  Multiplies over each window.

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.window_product(t, {1, 2})
      #Emily.Tensor<
        s32[2][2]
        [
          [2, 6],
          [20, 30]
        ]
      >
  """
  def window_product(tensor, window_dimensions, opts \\ []),
    do: reduce(:product, "window_product", tensor, window_dimensions, opts)

  @doc """
  The maximum of each window. Padding is the type's lowest value
  (`-Infinity` for floats); NaN propagates.

      iex> t = Emily.Tensor.tensor([[[4.0, 2.0, 3.0], [2.0, 5.0, 6.5]], [[1.2, 2.2, 3.2], [4.0, 5.0, 6.2]]])
      iex> Emily.Tensor.window_max(t, {2, 1, 1}, strides: [2, 1, 1], padding: [{1, 1}, {0, 0}, {1, 1}])
      #Emily.Tensor<
        f32[2][2][5]
        [
          [
            [-Inf, 4.0, 2.0, 3.0, -Inf],
            [-Inf, 2.0, 5.0, 6.5, -Inf]
          ],
          [
            [-Inf, 1.2, 2.2, 3.2, -Inf],
            [-Inf, 4.0, 5.0, 6.2, -Inf]
          ]
        ]
      >
  """
  def window_max(tensor, window_dimensions, opts \\ []),
    do: reduce(:max, "window_max", tensor, window_dimensions, opts)

  @doc """
  The minimum of each window. Padding is the type's highest value
  (`Infinity` for floats); NaN propagates.

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.window_min(t, {1, 2}, padding: :same)
      #Emily.Tensor<
        s32[2][3]
        [
          [1, 2, 3],
          [4, 5, 6]
        ]
      >
  """
  def window_min(tensor, window_dimensions, opts \\ []),
    do: reduce(:min, "window_min", tensor, window_dimensions, opts)

  @doc """
  The mean of each window: `window_sum/3` divided by the number of
  elements of the window (padding counts as zeros), as a float.

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> Emily.Tensor.window_mean(t, {2, 2})
      #Emily.Tensor<
        f32[1][2]
        [
          [3.0, 4.0]
        ]
      >
  """
  def window_mean(tensor, window_dimensions, opts \\ []) do
    sum = window_sum(tensor, window_dimensions, opts)
    size = window_dimensions |> Tuple.to_list() |> Enum.product()
    type = Type.to_floating(Type.merge_number(sum.type, size))
    sum = Core.cast(sum, type)
    divisor = Core.to_tensor(size, type)
    Core.wrap(Native.divide(sum.ref, divisor.ref))
  end

  @doc """
  Scatters `source` to the positions of each window's maximum, adding
  into a tensor of `tensor`'s shape filled with `init_value` (the gradient
  of `window_max/3`). `source` has the window output shape. Ties pick the
  last position of the window (row-major), as Nx's BinaryBackend does;
  padding is never selected. The output type merges `source` and
  `init_value`. Options: `:padding` and `:strides`.

      iex> t = Emily.Tensor.tensor([
      ...>   [7, 2, 5, 3, 10, 2],
      ...>   [3, 8, 9, 3, 4, 2],
      ...>   [1, 5, 7, 5, 6, 1],
      ...>   [0, 6, 2, 7, 2, 8]
      ...> ])
      iex> opts = [strides: [2, 3], padding: :valid]
      iex> t_scatter = Emily.Tensor.tensor([[2, 6], [3, 1]])
      iex> Emily.Tensor.window_scatter_max(t, t_scatter, 0, {2, 3}, opts)
      #Emily.Tensor<
        s32[4][6]
        [
          [0, 0, 0, 0, 6, 0],
          [0, 0, 2, 0, 0, 0],
          [0, 0, 3, 0, 0, 0],
          [0, 0, 0, 0, 0, 1]
        ]
      >
  """
  def window_scatter_max(tensor, source, init_value, window_dimensions, opts \\ []),
    do: scatter(true, tensor, source, init_value, window_dimensions, opts)

  @doc """
  Scatters `source` to the positions of each window's minimum (ties: the
  last position), adding into an `init_value`-filled tensor of `tensor`'s
  shape. See `window_scatter_max/5`.

      iex> t = Emily.Tensor.tensor([
      ...>   [7, 2, 5, 3, 10, 2],
      ...>   [3, 8, 9, 3, 4, 2],
      ...>   [1, 5, 7, 5, 6, 1],
      ...>   [0, 6, 2, 7, 2, 8]
      ...> ])
      iex> opts = [strides: [2, 3], padding: :valid]
      iex> t_scatter = Emily.Tensor.tensor([[2, 6], [3, 1]])
      iex> Emily.Tensor.window_scatter_min(t, t_scatter, 0, {2, 3}, opts)
      #Emily.Tensor<
        s32[4][6]
        [
          [0, 2, 0, 0, 0, 0],
          [0, 0, 0, 0, 0, 6],
          [0, 0, 0, 0, 0, 1],
          [3, 0, 0, 0, 0, 0]
        ]
      >
  """
  def window_scatter_min(tensor, source, init_value, window_dimensions, opts \\ []),
    do: scatter(false, tensor, source, init_value, window_dimensions, opts)

  @doc """
  Reduces each window with `fun`, starting from the scalar accumulator
  `acc`, as `Nx.window_reduce/5`. Padding holds `acc`; the result keeps the
  tensor's type (`acc` is cast to it).

  Options: `:strides`, `:padding` (`:valid`, `:same` or non-negative
  `{low, high}` per axis) and `:window_dilations`, as the other window
  functions.

  **Host path.** `fun` receives two scalar tensors, an element and the
  accumulator (`fun.(x, acc)`), and is run on the host once per element of
  every window: about 30 µs per call (measured: 28 µs per call with
  `Emily.Tensor.max/2`, 2×2 windows over a 100×100 f32 tensor, on the
  shared development machine), so a window of `k` elements costs about
  `30·k` µs per output element. Prefer `window_sum/3`, `window_product/3`,
  `window_max/3` and `window_min/3`, which run in the engine.

  ## Examples

      iex> init_value = Emily.Tensor.Constants.min_finite(:s32)
      iex> t = Emily.Tensor.tensor([[1, 2, 3, 4], [4, 5, 6, 7], [7, 8, 9, 10], [11, 12, 13, 14]])
      iex> Emily.Tensor.window_reduce(t, init_value, {2, 2}, fn x, acc -> Emily.Tensor.max(x, acc) end)
      #Emily.Tensor<
        s32[3][3]
        [
          [5, 6, 7],
          [8, 9, 10],
          [12, 13, 14]
        ]
      >

      iex> init_value = Emily.Tensor.Constants.min_finite(:s32)
      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
      iex> opts = [padding: :same, strides: [1, 1]]
      iex> Emily.Tensor.window_reduce(t, init_value, {2, 2}, opts, fn x, acc -> Emily.Tensor.max(x, acc) end)
      #Emily.Tensor<
        s32[3][3]
        [
          [5, 6, 6],
          [8, 9, 9],
          [8, 9, 9]
        ]
      >

      iex> t = Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]])
      iex> opts = [padding: :same, strides: [1, 1]]
      iex> Emily.Tensor.window_reduce(t, 0, {1, 2}, opts, fn x, acc -> Emily.Tensor.add(x, acc) end)
      #Emily.Tensor<
        s32[2][3]
        [
          [3, 5, 3],
          [9, 11, 6]
        ]
      >

      iex> t = Emily.Tensor.tensor([[[4, 2, 1, 3], [4, 2, 1, 7]], [[1, 2, 5, 7], [1, 8, 9, 2]]])
      iex> opts = [padding: :valid, strides: [2, 1, 1], window_dilations: [1, 1, 2]]
      iex> Emily.Tensor.window_reduce(t, 0, {1, 1, 2}, opts, fn x, acc -> Emily.Tensor.add(x, acc) end)
      #Emily.Tensor<
        s32[1][2][2]
        [
          [
            [5, 5],
            [5, 9]
          ]
        ]
      >
  """
  def window_reduce(tensor, acc, window_dimensions, opts \\ [], fun) when is_function(fun, 2) do
    opts = Core.options!(opts, strides: 1, padding: :valid, window_dilations: 1)
    t = Core.to_tensor(tensor)
    acc_t = Core.to_tensor(acc)

    if acc_t.shape != {} do
      raise ArgumentError,
            "window_reduce expects the accumulator to be a scalar, got shape #{inspect(acc_t.shape)}"
    end

    type = t.type
    shape = Tuple.to_list(t.shape)
    window = window!(shape, window_dimensions)
    strides = per_axis!(opts[:strides], shape, "stride")
    dilations = per_axis!(opts[:window_dilations], shape, "window dilations")
    {low, high} = padding!(opts[:padding], shape, window, dilations)

    if Enum.any?(low ++ high, &(&1 < 0)) do
      raise ArgumentError,
            "window_reduce padding must be non-negative, got: #{inspect(Enum.zip(low, high))}"
    end

    check_nonempty!(shape, window, strides, dilations, low, high)
    acc0 = acc_t |> Core.cast(type) |> Emily.Tensor.to_number()
    acc_scalar = Emily.Tensor.tensor(acc0, type: type)

    padded =
      if Enum.all?(low ++ high, &(&1 == 0)),
        do: t,
        else: Emily.Tensor.pad(t, acc_scalar, Enum.zip_with(low, high, &{&1, &2, 0}))

    pdims = Tuple.to_list(padded.shape)
    pstrides = row_major_strides(pdims)

    out_dims =
      Enum.zip_with([pdims, window, strides, dilations], fn [p, w, s, d] ->
        div(p - ((w - 1) * d + 1), s) + 1
      end)

    offsets =
      Enum.zip_with([window, dilations, pstrides], fn [w, d, ps] ->
        for k <- 0..(w - 1)//1, do: k * d * ps
      end)
      |> combine_offsets()

    bases =
      Enum.zip_with([out_dims, strides, pstrides], fn [o, s, ps] ->
        for k <- 0..(o - 1)//1, do: k * s * ps
      end)
      |> combine_offsets()

    values = padded |> Emily.Tensor.to_flat_list() |> List.to_tuple()

    results =
      for base <- bases do
        Enum.reduce(offsets, acc0, fn off, a ->
          host_apply(fun, elem(values, base + off), a, type)
        end)
      end

    results |> Emily.Tensor.tensor(type: type) |> Emily.Tensor.reshape(List.to_tuple(out_dims))
  end

  defp row_major_strides(dims) do
    {strides, _} = dims |> Enum.reverse() |> Enum.map_reduce(1, fn d, acc -> {acc, acc * d} end)

    Enum.reverse(strides)
  end

  # Every sum of one entry per list, in row-major order.
  defp combine_offsets(lists) do
    Enum.reduce(Enum.reverse(lists), [0], fn list, inner ->
      for a <- list, b <- inner, do: a + b
    end)
  end

  defp host_apply(fun, x, acc, type) do
    result = fun.(Emily.Tensor.tensor(x, type: type), Emily.Tensor.tensor(acc, type: type))
    result |> Core.to_tensor() |> Core.cast(type) |> Emily.Tensor.to_number()
  end

  # ---- helpers ----

  defp reduce(op, name, tensor, window, opts) do
    opts = Core.options!(opts, strides: 1, padding: :valid, window_dilations: 1)
    t = Core.to_tensor(tensor)

    if op in [:max, :min] and Type.complex?(t.type) do
      raise ArgumentError,
            "#{name} is not supported for complex tensors, got type #{Type.to_string(t.type)}"
    end

    shape = Tuple.to_list(t.shape)
    window = window!(shape, window)
    strides = per_axis!(opts[:strides], shape, "stride")
    dilations = per_axis!(opts[:window_dilations], shape, "window dilations")
    {low, high} = padding!(opts[:padding], shape, window, dilations)
    check_nonempty!(shape, window, strides, dilations, low, high)
    Core.wrap(Native.window_reduce(t.ref, op, window, strides, low, high, dilations))
  end

  defp scatter(select_max, tensor, source, init_value, window, opts) do
    opts = Core.options!(opts, strides: 1, padding: :valid)
    t = Core.to_tensor(tensor)
    source = Core.to_tensor(source)
    name = if select_max, do: "window_scatter_max", else: "window_scatter_min"

    if Type.complex?(t.type) do
      raise ArgumentError,
            "#{name} is not supported for complex tensors, got type #{Type.to_string(t.type)}"
    end

    type =
      case init_value do
        %Emily.Tensor{type: it} -> Type.merge(source.type, it)
        n -> Type.merge_number(source.type, n)
      end

    init = Core.to_tensor(init_value, type)

    if tuple_size(init.shape) != 0 do
      raise ArgumentError,
            "#{name} expects init_value to be a scalar, got shape #{inspect(init.shape)}"
    end

    source = Core.cast(source, type)
    shape = Tuple.to_list(t.shape)
    window = window!(shape, window)
    strides = per_axis!(opts[:strides], shape, "stride")
    ones = List.duplicate(1, length(shape))
    {low, high} = padding!(opts[:padding], shape, window, ones)
    check_nonempty!(shape, window, strides, ones, low, high)

    Core.wrap(
      Native.window_scatter(t.ref, source.ref, init.ref, select_max, window, strides, low, high)
    )
  end

  defp window!(shape, window) when is_tuple(window) do
    if tuple_size(window) != length(shape) do
      raise ArgumentError,
            "invalid window dimensions, rank of shape (#{length(shape)})" <>
              " does not match rank of window (#{tuple_size(window)})"
    end

    window = Tuple.to_list(window)

    unless Enum.all?(window, &(is_integer(&1) and &1 >= 1)) do
      raise ArgumentError,
            "window dimensions must be positive integers, got: #{inspect(List.to_tuple(window))}"
    end

    window
  end

  defp window!(_shape, window),
    do: raise(ArgumentError, "window dimensions must be a tuple, got: #{inspect(window)}")

  defp per_axis!(n, shape, _what) when is_integer(n) and n >= 1,
    do: List.duplicate(n, length(shape))

  defp per_axis!(list, shape, what) when is_list(list) do
    if length(list) != length(shape) do
      raise ArgumentError,
            "invalid #{what} dimensions, rank of shape (#{length(shape)})" <>
              " does not match rank of #{what} (#{length(list)})"
    end

    unless Enum.all?(list, &(is_integer(&1) and &1 >= 1)) do
      raise ArgumentError, "#{what} must be positive integers, got: #{inspect(list)}"
    end

    list
  end

  defp per_axis!(other, _shape, what),
    do:
      raise(ArgumentError, "#{what} must be a positive integer or a list, got: #{inspect(other)}")

  defp padding!(:valid, shape, _window, _dil) do
    zeros = List.duplicate(0, length(shape))
    {zeros, zeros}
  end

  defp padding!(:same, _shape, window, dil) do
    Enum.zip_with(window, dil, fn w, d ->
      total = (w - 1) * d
      {div(total, 2), total - div(total, 2)}
    end)
    |> Enum.unzip()
  end

  defp padding!(config, shape, _window, _dil) when is_list(config) do
    unless length(config) == length(shape) and
             Enum.all?(config, &match?({lo, hi} when is_integer(lo) and is_integer(hi), &1)) do
      raise ArgumentError,
            "invalid padding configuration, expected :valid, :same or one {low, high} " <>
              "integer pair per axis of a rank #{length(shape)} tensor, got: #{inspect(config)}"
    end

    Enum.unzip(config)
  end

  defp padding!(other, _shape, _window, _dil) do
    raise ArgumentError,
          "invalid padding mode specified, padding must be one of :valid, :same, " <>
            "or a padding configuration, got: #{inspect(other)}"
  end

  defp check_nonempty!(shape, window, strides, dil, low, high) do
    [shape, window, strides, dil, low, high]
    |> Enum.zip()
    |> Enum.each(fn {d, w, _s, dl, lo, hi} ->
      if d + lo + hi < (w - 1) * dl + 1 do
        raise ArgumentError,
              "window dimensions would result in empty tensor which is not currently " <>
                "supported in Nx, please open an issue if you'd like this behavior to change"
      end
    end)
  end
end
