defimpl Inspect, for: Emily.Tensor do
  # Prints like Nx's `#Nx.Tensor<...>`: the type and shape line, then the
  # data, nested with two spaces per level. At most `opts.limit` numbers
  # are printed (50 by default); every list cut short ends in `...`.
  import Inspect.Algebra

  alias Emily.Tensor.{Creation, Format, Type}

  # A template has no data and a deallocated tensor none left: a word
  # stands in for the data (as Nx prints its template backend's name).
  def inspect(%Emily.Tensor{shape: shape, type: type, donatable: donatable} = tensor, opts) do
    open = color("[", :list, opts)
    close = color("]", :list, opts)

    dims =
      shape
      |> Tuple.to_list()
      |> Enum.map(&concat([open, Integer.to_string(&1), close]))

    mark = if donatable == true, do: [" [donatable]"], else: []
    header = concat([color(Type.to_string(type), :atom, opts) | dims ++ mark])

    body =
      case tensor.ref do
        :template ->
          "template (no data)"

        ref ->
          if Emily.Native.is_deallocated(ref),
            do: "deallocated",
            else: data(tensor, opts, open, close)
      end

    inner = concat([line(), header, line(), body])

    force_unfit(
      concat([
        color("#Emily.Tensor<", :map, opts),
        nest(inner, 2),
        line(),
        color(">", :map, opts)
      ])
    )
  end

  defp data(%Emily.Tensor{shape: shape, type: type} = tensor, opts, open, close) do
    size = shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))
    limit = opts.limit
    count = if limit == :infinity, do: size, else: min(max(limit, 0), size)

    values =
      if count == 0 and shape != {},
        do: [],
        else: Creation.decode(Creation.read(tensor, max(count, 1)), type)

    number = fn v -> color(Format.number(v, type), :number, opts) end

    case Tuple.to_list(shape) do
      [] ->
        number.(hd(values))

      dims ->
        {doc, _rest, _limit} = chunk(dims, values, limit, number, open, close)
        doc
    end
  end

  defp chunk([], [value | rest], limit, number, _open, _close),
    do: {number.(value), rest, decrement(limit)}

  defp chunk([dim | dims], values, limit, number, open, close) do
    {docs, rest, limit} = each(dim, dims, values, [], limit, number, open, close)

    doc =
      cond do
        docs == [] ->
          concat(open, close)

        dims == [] ->
          concat([open, concat(Enum.intersperse(docs, ", ")), close])

        true ->
          body = concat([line() | Enum.intersperse(docs, concat(",", line()))])
          concat([open, nest(body, 2), line(), close])
      end

    {doc, rest, limit}
  end

  defp each(0, _dims, values, acc, limit, _number, _open, _close),
    do: {Enum.reverse(acc), values, limit}

  defp each(_n, _dims, values, acc, 0, _number, _open, _close),
    do: {Enum.reverse(["..." | acc]), values, 0}

  defp each(n, dims, values, acc, limit, number, open, close) do
    {doc, rest, limit} = chunk(dims, values, limit, number, open, close)
    each(n - 1, dims, rest, [doc | acc], limit, number, open, close)
  end

  defp decrement(:infinity), do: :infinity
  defp decrement(n), do: n - 1
end
