defmodule Emily.Debug do
  @moduledoc false
  # The checks behind the :debug_bounds_check and :debug_detect_nan_inf
  # flags. Only code compiled with a flag on calls into this module (see
  # Emily); each check is an engine reduction plus a scalar readback on the
  # current stream.

  alias Emily.Native

  @doc """
  Indices of any shape addressing `axis` of `tensor` (take,
  take_along_axis).
  """
  def check_indices!(op, tensor, indices, axis) do
    {axis, dim} = axis_dim!(op, tensor, axis)

    unless read_pred(Native.indices_in_range(indices, dim)) do
      raise_out_of_range!(op, indices, axis, dim)
    end

    :ok
  end

  @doc """
  Index rows `[..., k]` whose column j addresses `axes[j]` (gather,
  indexed_add, indexed_put); `axes == []` means the first k axes.
  """
  def check_index_rows!(op, tensor, indices, axes) do
    index_shape = Native.shape(indices)

    case index_shape do
      [] ->
        :ok

      _ ->
        k = List.last(index_shape)
        axes = if axes == [], do: Enum.to_list(0..(k - 1)//1), else: axes
        columns = index_columns(indices, index_shape, k)
        checks = Enum.zip(columns, axes)

        in_range =
          checks
          |> Enum.map(fn {column, axis} ->
            {_axis, dim} = axis_dim!(op, tensor, axis)
            Native.indices_in_range(column, dim)
          end)
          |> Enum.reduce(&Native.logical_and/2)

        # One readback when all is well; look for the culprit otherwise.
        unless checks == [] or read_pred(in_range) do
          Enum.each(checks, fn {column, axis} ->
            {axis, dim} = axis_dim!(op, tensor, axis)

            unless read_pred(Native.indices_in_range(column, dim)) do
              raise_out_of_range!(op, column, axis, dim)
            end
          end)
        end

        :ok
    end
  end

  @doc "Raises when `result` (a float or complex tensor) holds a NaN or an infinity."
  def check_finite!(op, result) do
    {kind, _} = Native.dtype(result)

    if kind in [:f, :bf, :c] do
      bad = Native.logical_or(Native.is_nan(result), Native.is_infinity(result))

      if read_pred(Native.any(bad, nil, false)) do
        raise ArgumentError, "#{op}: produced NaN or Inf"
      end
    end

    result
  end

  defp index_columns(indices, shape, k) do
    rank = length(shape)

    for j <- 0..(k - 1)//1 do
      start = List.duplicate(0, rank - 1) ++ [j]
      stop = List.replace_at(shape, rank - 1, j + 1)
      Native.slice(indices, start, stop, List.duplicate(1, rank))
    end
  end

  defp axis_dim!(op, tensor, axis) do
    shape = Native.shape(tensor)
    rank = length(shape)
    normalized = if axis < 0, do: axis + rank, else: axis

    unless normalized >= 0 and normalized < rank do
      raise ArgumentError,
            "#{op}: axis #{axis} is out of range for a tensor of shape #{inspect(shape)}"
    end

    {normalized, Enum.at(shape, normalized)}
  end

  defp raise_out_of_range!(op, indices, axis, dim) do
    low = read_s64(Native.min(indices, nil, false))
    high = read_s64(Native.max(indices, nil, false))

    if low < 0 do
      raise ArgumentError, "#{op}: index #{low} on axis #{axis} is negative (dim=#{dim})"
    else
      raise ArgumentError, "#{op}: index #{high} on axis #{axis} is out of range (dim=#{dim})"
    end
  end

  defp read_pred(tensor) do
    <<value>> = read(tensor)
    value != 0
  end

  defp read_s64(tensor) do
    <<value::signed-64-native>> = read(Native.as_type(tensor, {:s, 64}))
    value
  end

  defp read(tensor), do: Native.await(Native.to_binary(Emily.Stream.current(), tensor))
end
