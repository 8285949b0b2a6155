defmodule EmilyTest.Differential.Compare do
  @moduledoc false
  # Compares a reference result (Nx.BinaryBackend, or a corrected reference)
  # with Emily's result transferred to Nx.BinaryBackend.
  #
  # Modes:
  #   :exact                 - bit-identical (any NaN equals any NaN)
  #   :exact_nosign          - as :exact, but -0.0 equals 0.0
  #   {:tol, rel, abs}       - |got - exp| <= eps * (rel * |exp| + abs * scale)
  #                            with eps the machine epsilon of the output type
  #                            and `scale` given by the case (default 1.0);
  #                            NaN positions and infinities must match
  # Integer and predicate outputs are always compared exactly.

  @eps %{
    {:f, 16} => 2.0 ** -10,
    {:bf, 16} => 2.0 ** -7,
    {:f, 32} => 2.0 ** -23,
    {:f, 64} => 2.0 ** -52
  }

  def eps({:c, 64}), do: @eps[{:f, 32}]
  def eps({:c, 128}), do: @eps[{:f, 64}]
  def eps(type), do: Map.fetch!(@eps, type)

  @doc "Results as a flat list of tensors (tuples and numbers included)."
  def flatten(%Nx.Tensor{} = t), do: [t]

  def flatten(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.flat_map(&flatten/1)

  def flatten(list) when is_list(list), do: Enum.flat_map(list, &flatten/1)
  def flatten(other), do: [other]

  def compare(expected, got, mode, scale, eps_of \\ nil) do
    exp = flatten(expected)
    got = flatten(got)

    cond do
      length(exp) != length(got) ->
        {:error, "different number of outputs: #{length(exp)} vs #{length(got)}"}

      true ->
        exp
        |> Enum.zip(got)
        |> Enum.with_index()
        |> Enum.find_value(:ok, fn {{e, g}, i} ->
          case compare_one(e, g, mode, scale, eps_of) do
            :ok -> nil
            {:error, msg} -> {:error, "output #{i}: #{msg}"}
          end
        end)
    end
  end

  defp compare_one(%Nx.Tensor{} = e, %Nx.Tensor{} = g, mode, scale, eps_of) do
    cond do
      e.shape != g.shape -> {:error, "shape #{inspect(e.shape)} vs #{inspect(g.shape)}"}
      e.type != g.type -> {:error, "type #{inspect(e.type)} vs #{inspect(g.type)}"}
      e.names != g.names -> {:error, "names #{inspect(e.names)} vs #{inspect(g.names)}"}
      true -> compare_values(e, g, relax(mode, e.type), scale, eps_of)
    end
  end

  defp compare_one(e, g, _mode, _scale, _eps_of) do
    if e == g, do: :ok, else: {:error, "#{inspect(e)} vs #{inspect(g)}"}
  end

  # BinaryBackend truncates every conversion to bf16 (f32 1.01171875 gives
  # 1.0078125, not 1.015625): a bf16 result that converts or rounds may be
  # one ulp off there.
  defp relax(:exact, {:bf, 16}), do: {:tol, 1, 0}
  defp relax(mode, _type), do: mode

  defp compare_values(%{type: {kind, _}} = e, g, _mode, _scale, _eps_of) when kind in [:s, :u] do
    if Nx.to_binary(e) == Nx.to_binary(g), do: :ok, else: mismatch(e, g)
  end

  # Complex values within tolerance as complex numbers: |e - g| against
  # |e| (a small component of a large number carries no precision of its own).
  defp compare_values(%{type: {:c, _} = type} = e, g, {:tol, rel, abs}, scale, eps_of) do
    eps = eps(eps_of || type)
    pairs = Enum.zip(Enum.chunk_every(components(e), 2), Enum.chunk_every(components(g), 2))

    ok? =
      Enum.all?(pairs, fn {[{er, _}, {ei, _}], [{gr, _}, {gi, _}]} ->
        finite? = Enum.all?([er, ei, gr, gi], &is_number/1)

        not_finite? =
          not Enum.all?([er, ei], &is_number/1) and not Enum.all?([gr, gi], &is_number/1)

        not_finite? or
          (finite? and
             hypot(er / 2 - gr / 2, ei / 2 - gi / 2) <=
               eps * rel * hypot(er / 2, ei / 2) + eps * abs * scale / 2)
      end)

    if ok?, do: :ok, else: mismatch(e, g)
  end

  defp compare_values(%{type: type} = e, g, {:tol, rel, abs}, scale, eps_of) do
    eps = eps(eps_of || type)
    elementwise(e, g, &close?(&1, &2, eps, rel, abs * scale))
  end

  defp compare_values(e, g, mode, _scale, _eps_of),
    do: elementwise(e, g, &same_float?(&1, &2, mode))

  defp elementwise(%{type: type} = e, g, fun) do
    pairs = Enum.zip(components(e), components(g))

    # Complex results that are not finite: C99 (Emily) and Erlang's Complex
    # (BinaryBackend) disagree on which of NaN and Inf a complex division by
    # zero or an overflow gives ((-0.5-2i) / -0.0 is NaN+NaNi in
    # BinaryBackend, Inf+Infi in Emily); only "not finite" is compared.
    pairs =
      if match?({:c, _}, type),
        do: pairs |> Enum.chunk_every(2) |> Enum.flat_map(&finite_or_not/1),
        else: pairs

    case Enum.find_index(pairs, fn {a, b} -> not fun.(a, b) end) do
      nil -> :ok
      _ -> mismatch(e, g)
    end
  end

  # Floats as a flat list of real components: complex numbers give re, im.
  # Values come from the binary so that -0.0 and NaN are seen as they are.
  defp components(%{type: {:c, bits}} = t) do
    half = div(bits, 2)

    for <<re::bitstring-size(half), im::bitstring-size(half) <- Nx.to_binary(t)>>,
        v <- [re, im],
        do: decode(v, half)
  end

  defp components(%{type: {:bf, 16}} = t) do
    for <<v::16-native <- Nx.to_binary(t)>>, do: decode(<<v::16, 0::16>>, 32, :big)
  end

  defp components(%{type: {:f, bits}} = t) do
    for <<v::bitstring-size(bits) <- Nx.to_binary(t)>>, do: decode(v, bits)
  end

  # {:nan | :inf | :neg_inf | float, sign_bit}
  defp decode(bits, size, endian \\ :native) do
    <<sign::1, _::bitstring>> = if endian == :big, do: bits, else: reverse_bytes(bits)

    value =
      case {size, endian} do
        {16, _} -> decode_f16(bits)
        {_, :big} -> decode_big(bits, size)
        _ -> decode_big(reverse_bytes(bits), size)
      end

    {value, sign}
  end

  defp reverse_bytes(bits) do
    if System.endianness() == :little,
      do: bits |> :binary.bin_to_list() |> Enum.reverse() |> :binary.list_to_bin(),
      else: bits
  end

  defp decode_big(bits, size) do
    case bits do
      <<v::float-size(size)>> -> v
      _ -> non_finite(bits, size)
    end
  end

  defp non_finite(bits, size) do
    mant = size - 1 - if(size == 32, do: 8, else: 11)
    <<sign::1, _exp::size(size - 1 - mant), m::size(mant)>> = bits

    cond do
      m != 0 -> :nan
      sign == 1 -> :neg_inf
      true -> :inf
    end
  end

  defp decode_f16(bits) do
    <<v::16>> = reverse_bytes(bits)
    <<sign::1, exp::5, mant::10>> = <<v::16>>
    s = if sign == 1, do: -1.0, else: 1.0

    case exp do
      31 -> if mant != 0, do: :nan, else: if(sign == 1, do: :neg_inf, else: :inf)
      0 -> s * mant * 2.0 ** -24
      _ -> s * (1 + mant / 1024) * 2.0 ** (exp - 15)
    end
  end

  # A complex element (its re and im pairs) that is not finite on both
  # sides compares equal.
  # Scaled so that squares of huge components cannot overflow.
  defp hypot(a, b) do
    {big, small} =
      if Kernel.abs(a) >= Kernel.abs(b),
        do: {Kernel.abs(a), Kernel.abs(b)},
        else: {Kernel.abs(b), Kernel.abs(a)}

    if big == 0, do: 0.0, else: big * :math.sqrt(1 + small / big * (small / big))
  end

  defp finite_or_not([{{er, _}, {gr, _}}, {{ei, _}, {gi, _}}] = pair) do
    if (is_atom(er) or is_atom(ei)) and (is_atom(gr) or is_atom(gi)),
      do: [{{:not_finite, 0}, {:not_finite, 0}}],
      else: pair
  end

  defp same_float?({a, sa}, {b, sb}, mode) do
    cond do
      a == :nan or b == :nan -> a == b
      mode == :exact_nosign -> a == b
      true -> a == b and sa == sb
    end
  end

  defp close?({a, _}, {b, _}, eps, rel, abs) do
    cond do
      a == :nan or b == :nan ->
        a == b

      is_atom(a) or is_atom(b) ->
        a == b

      # Halved so that the difference of two huge floats cannot overflow.
      true ->
        Kernel.abs(a / 2 - b / 2) <= eps * rel * (Kernel.abs(a) / 2) + eps * abs / 2 or a == b
    end
  end

  defp mismatch(e, g) do
    show = &EmilyTest.Differential.show/1
    {:error, "values differ\n    expected: #{show.(e)}\n    got:      #{show.(g)}"}
  end
end
