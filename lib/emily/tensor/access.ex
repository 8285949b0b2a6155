defmodule Emily.Tensor.Access do
  @moduledoc """
  `tensor[...]` for `Emily.Tensor`, as Nx's Access implementation.

  Per axis, from the first: an integer picks one entry and drops the axis
  (negative counts from the end; out of range raises); a range
  `first..last//step` keeps the axis (inclusive, negative ends count from
  the end, `..` is the whole axis); a scalar integer tensor picks one entry
  with its start clamped into range. A list gives one such index per
  leading axis. An integer tensor of rank >= 1 takes along axis 0.

      iex> t = Emily.Tensor.iota({2, 3})
      iex> t[1] |> Emily.Tensor.to_list()
      [3, 4, 5]
      iex> t[[.., 1..2]] |> Emily.Tensor.to_list()
      [[1, 2], [4, 5]]
      iex> t[-1][0] |> Emily.Tensor.to_number()
      3

  Writing through Access (`put_in`, `pop`) is not supported: tensors are
  immutable; use `put_slice/3` or `indexed_put/3`.
  """

  @doc false
  def fetch(%Emily.Tensor{} = tensor, %Emily.Tensor{shape: {}} = index),
    do: {:ok, index_axes(tensor, [index])}

  def fetch(%Emily.Tensor{} = tensor, %Emily.Tensor{} = indices),
    do: {:ok, Emily.Tensor.take(tensor, indices, axis: 0)}

  def fetch(%Emily.Tensor{} = tensor, indices) when is_list(indices),
    do: {:ok, index_axes(tensor, indices)}

  def fetch(%Emily.Tensor{} = tensor, index), do: {:ok, index_axes(tensor, [index])}

  @doc false
  def get_and_update(_tensor, _index, _fun) do
    raise ArgumentError,
          "Access.get_and_update/3 is not supported by Emily.Tensor (tensors are immutable); " <>
            "use Emily.Tensor.put_slice/3 or Emily.Tensor.indexed_put/3"
  end

  @doc false
  def pop(_tensor, _index) do
    raise ArgumentError, "Access.pop/2 is not supported by Emily.Tensor (tensors are immutable)"
  end

  defp index_axes(%Emily.Tensor{shape: shape} = tensor, indices) do
    rank = tuple_size(shape)

    if length(indices) > rank do
      raise ArgumentError,
            "too many indices (#{length(indices)}) for tensor of rank #{rank}"
    end

    dims = Tuple.to_list(shape)
    specs = indices |> Enum.with_index() |> Enum.map(fn {index, axis} -> spec(index, Enum.at(dims, axis), axis) end)
    rest = dims |> Enum.drop(length(indices)) |> Enum.map(&{0, &1, 1, :keep})
    all = specs ++ rest

    starts = Enum.map(all, &elem(&1, 0))
    lengths = Enum.map(all, &elem(&1, 1))
    strides = Enum.map(all, &elem(&1, 2))

    dropped =
      all
      |> Enum.with_index()
      |> Enum.filter(fn {spec, _} -> elem(spec, 3) == :drop end)
      |> Enum.map(&elem(&1, 1))

    sliced = Emily.Tensor.slice(tensor, starts, lengths, strides: strides)
    if dropped == [], do: sliced, else: Emily.Tensor.squeeze(sliced, axes: dropped)
  end

  defp spec(i, dim, axis) when is_integer(i) do
    j = if i < 0, do: i + dim, else: i

    if j < 0 or j >= dim do
      raise ArgumentError,
            "index #{i} is out of bounds for axis #{axis} with size #{dim}"
    end

    {j, 1, 1, :drop}
  end

  defp spec(%Emily.Tensor{shape: {}, type: {kind, _}} = t, _dim, _axis) when kind in [:u, :s],
    do: {t, 1, 1, :drop}

  defp spec(%Emily.Tensor{} = t, _dim, axis) do
    raise ArgumentError,
          "expected an integer scalar tensor to index axis #{axis}, got a tensor of " <>
            "type #{Emily.Tensor.Type.to_string(t.type)} and shape #{inspect(t.shape)}"
  end

  defp spec(first..last//step = range, dim, axis) do
    if step <= 0 do
      raise ArgumentError, "range #{inspect(range)} for axis #{axis} must have a positive step"
    end

    first = if first < 0, do: first + dim, else: first
    last = if last < 0, do: last + dim, else: last

    cond do
      first < 0 or first > dim or last >= dim ->
        raise ArgumentError,
              "range #{inspect(range)} is out of bounds for axis #{axis} with size #{dim}"

      last < first ->
        {first, 0, 1, :keep}

      true ->
        # Nx's slice lengths count input elements, before the stride.
        {first, last - first + 1, step, :keep}
    end
  end

  defp spec(other, _dim, axis) do
    raise ArgumentError,
          "invalid index #{inspect(other)} for axis #{axis}: expected an integer, a range, " <>
            "or an integer scalar tensor"
  end
end
