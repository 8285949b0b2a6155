defmodule Emily.Backend.F8Test do
  # The 8-bit floats (f8 = E5M2, f8_e4m3fn = E4M3FN), emulated on engine f16
  # refs (Emily.Backend.Util, "8-bit floats"). Nx.BinaryBackend is the
  # reference for the bytes and the values of every bit pattern; for the
  # rounding of results, a reference rounding to nearest even written here
  # (Nx.BinaryBackend truncates E5M2 results).
  use ExUnit.Case, async: true

  @types [{:f, 8}, {:f8_e4m3fn, 8}]
  @all_bytes for b <- 0..255, into: <<>>, do: <<b>>

  defp emily(binary, type), do: Nx.from_binary(binary, type, backend: Emily.Backend)
  defp binary(binary, type), do: Nx.from_binary(binary, type, backend: Nx.BinaryBackend)

  # The value of each element as a float, :nan or an infinity.
  defp values(%{type: type} = t) when type in @types,
    do: for(<<b <- Nx.to_binary(t)>>, do: value(b, type))

  defp values(t), do: t |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.to_flat_list()

  # The value of an f8 byte. Nx.Floating.load_f8 reads E5M2 subnormals as
  # if normal (byte 1 as 2^-15·1.25, not 2^-16), so E5M2 is read as the
  # upper byte of an f16 here; Nx.Floating.load_f8_e4m3fn is right.
  defp value(b, {:f, 8}) do
    case <<Bitwise.bsl(b, 8)::16>> do
      <<x::float-16>> -> x
      _ when b in [0x7C, 0xFC] -> if b == 0x7C, do: :infinity, else: :neg_infinity
      _ -> :nan
    end
  end

  defp value(b, {:f8_e4m3fn, 8}), do: Nx.Floating.load_f8_e4m3fn(<<b>>)

  # The f8 values with their bytes: the grid results must be on.
  defp grid(type) do
    for b <- 0..255, v = value(b, type), is_float(v), do: {v, b}
  end

  # Round to nearest even on the grid of `type` (saturating E4M3FN as
  # Nx.Floating does, E5M2 overflowing to Inf at the midpoint after its
  # largest value).
  defp rne(x, type) do
    {max, inf} = if type == {:f, 8}, do: {57344.0, :infinity}, else: {448.0, 448.0}
    mag = abs(x)

    r =
      cond do
        mag >= max and type == {:f8_e4m3fn, 8} ->
          max

        mag >= 61440.0 ->
          inf

        true ->
          grid(type)
          |> Enum.filter(fn {v, _} -> v >= 0 end)
          |> Enum.min_by(fn {v, b} -> {abs(v - mag), Bitwise.band(b, 1)} end)
          |> elem(0)
      end

    cond do
      x >= 0 -> r
      r == :infinity -> :neg_infinity
      true -> -r
    end
  end

  for type <- @types do
    @type_ type
    describe "#{inspect(type)}" do
      test "every bit pattern keeps its byte, as on Nx.BinaryBackend" do
        t = emily(@all_bytes, @type_)
        assert Nx.to_binary(t) == @all_bytes
        # Through an op that rounds its result (a copy through wrap/3).
        assert Nx.to_binary(Nx.reshape(t, {16, 16}) |> Nx.transpose() |> Nx.transpose()) ==
                 @all_bytes
      end

      test "conversions to and from f32 are exact on every value" do
        e = emily(@all_bytes, @type_)
        expected = for b <- 0..255, do: value(b, @type_)
        assert values(Nx.as_type(e, :f32)) == expected
        assert values(Nx.as_type(e, :f64)) == expected
        # Back: every byte but the NaNs' exactly (a NaN stays a NaN, which
        # f32 may have made quiet).
        back = e |> Nx.as_type(:f32) |> Nx.as_type(@type_)
        assert values(back) == expected

        for {{b, v}, x} <-
              Enum.zip(
                Enum.with_index(expected, &{&2, &1}),
                :binary.bin_to_list(Nx.to_binary(back))
              ),
            v != :nan,
            do: assert(b == x)

        # Values of the grid in f32 convert as on Nx.BinaryBackend (which
        # writes exact values right, but -0.0 as 0.0: see :neg_zero).
        finite = for {v, b} <- grid(@type_), b != 0x80, do: v
        f32 = Nx.tensor(finite, type: :f32)

        assert Nx.to_binary(Nx.as_type(Nx.backend_copy(f32, Emily.Backend), @type_)) ==
                 Nx.to_binary(Nx.as_type(Nx.backend_copy(f32, Nx.BinaryBackend), @type_))
      end

      test "bitcast is the bytes" do
        t = emily(@all_bytes, @type_)
        assert Nx.to_binary(Nx.bitcast(t, :u8)) == @all_bytes

        assert Nx.to_binary(Nx.bitcast(Nx.from_binary(@all_bytes, :u8, backend: Emily.Backend), @type_)) == @all_bytes
      end

      test "results round to nearest even, from f32 without rounding twice" do
        {grid_values, _} = @type_ |> grid() |> Enum.unzip()
        finite = Enum.filter(grid_values, &(abs(&1) <= 448.0))
        sorted = Enum.sort(finite) |> Enum.dedup()
        # Midpoints, and values just off them (which f16 would round onto
        # the midpoint).
        mids = Enum.zip_with(sorted, tl(sorted), &((&1 + &2) / 2))

        inputs =
          mids ++ Enum.map(mids, &(&1 * (1 + 1.0e-6))) ++ Enum.map(mids, &(&1 * (1 - 1.0e-6)))

        got = values(Nx.as_type(Nx.tensor(inputs, type: :f32, backend: Emily.Backend), @type_))
        # the inputs as f32
        inputs32 = Nx.tensor(inputs, type: :f32, backend: Nx.BinaryBackend) |> Nx.to_flat_list()
        expected = Enum.map(inputs32, &rne(&1, @type_))
        assert [] == for({x, g, e} <- Enum.zip([inputs32, got, expected]), g != e, do: {x, g, e})
      end

      test "arithmetic runs in f16 and rounds once" do
        a = Nx.tensor([1.0, 1.5, 3.0, -2.5, 0.25], type: @type_, backend: Emily.Backend)
        b = Nx.tensor([0.25, 0.125, 0.75, 1.0, 0.0625], type: @type_, backend: Emily.Backend)

        for {op, f} <- [add: &+/2, subtract: &-/2, multiply: &*/2, divide: &//2] do
          result = apply(Nx, op, [a, b])
          assert result.type == @type_
          expected = Enum.zip_with(values(a), values(b), &rne(f.(&1, &2), @type_))
          assert values(result) == expected, "#{op}"
        end

        assert values(Nx.sum(a)) == [rne(3.25, @type_)]

        assert values(Nx.exp(Nx.tensor([0.0, 1.0], type: @type_, backend: Emily.Backend))) == [
                 1.0,
                 rne(2.718281828, @type_)
               ]
      end

      test "literals are written as Nx writes them" do
        for x <- [0.1, 1.3, 3.14159, 300.0, -7.0e-3, :nan, :infinity, :neg_infinity] do
          e = Nx.tensor(x, type: @type_, backend: Emily.Backend)
          b = Nx.tensor(x, type: @type_, backend: Nx.BinaryBackend)
          assert Nx.to_binary(e) == Nx.to_binary(b), inspect(x)

          assert Nx.to_binary(Nx.broadcast(Nx.tensor(x, type: @type_, backend: Emily.Backend), {3})) ==
                   String.duplicate(Nx.to_binary(b), 3)
        end
      end

      test "prints as Nx.BinaryBackend" do
        t = emily(@all_bytes, @type_)

        assert inspect(t, limit: :infinity) ==
                 inspect(binary(@all_bytes, @type_), limit: :infinity)
      end

      test "pointers carry the bytes" do
        t = emily(@all_bytes, @type_)
        pointer = Nx.to_pointer(t, mode: :local)
        assert pointer.data_size == 256
        copy = Nx.from_pointer(Emily.Backend, pointer, @type_, {256})
        assert Nx.to_binary(copy) == @all_bytes
        # The pointer lives as long as its tensor.
        assert Nx.to_binary(t) == @all_bytes
      end
    end
  end

  test "E4M3FN saturates: Inf and overflow are ±448, NaN stays NaN" do
    t = Nx.tensor([1.0e6, -1.0e6, 460.0, 65504.0], type: :f32, backend: Emily.Backend)

    t =
      Nx.concatenate([t, Nx.Constants.infinity(:f32, backend: Emily.Backend) |> Nx.reshape({1})])

    assert values(Nx.as_type(t, :f8_e4m3fn)) == [448.0, -448.0, 448.0, 448.0, 448.0]
    big = Nx.tensor([300.0], type: :f8_e4m3fn, backend: Emily.Backend)
    assert values(Nx.add(big, big)) == [448.0]

    assert Nx.to_binary(Nx.as_type(Nx.Constants.nan(:f32, backend: Emily.Backend), :f8_e4m3fn)) ==
             <<0x7F>>
  end

  test "E5M2 overflows to Inf" do
    t = Nx.tensor([57344.0, 61439.0, 61440.0, -1.0e6], type: :f32, backend: Emily.Backend)
    assert values(Nx.as_type(t, :f8)) == [57344.0, 57344.0, :infinity, :neg_infinity]
  end

  test "mixed with other types: integers and f32 promote as Nx says" do
    f8 = Nx.tensor([1.0, 2.0], type: :f8, backend: Emily.Backend)
    assert Nx.add(f8, Nx.tensor([1, 2], type: :s8, backend: Emily.Backend)).type == {:f, 8}

    assert values(Nx.add(f8, Nx.tensor([0.5, 0.25], type: :f32, backend: Emily.Backend))) == [
             1.5,
             2.25
           ]

    assert values(Nx.add(f8, Nx.tensor([1.0, 2.0], type: :f8, backend: Nx.BinaryBackend))) == [
             2.0,
             4.0
           ]
  end

  test "defn over f8 inputs" do
    f = Nx.Defn.jit(fn x, y -> Nx.multiply(x, y) |> Nx.add(1) end, compiler: Emily.Compiler)
    x = Nx.tensor([1.0, 3.0], type: :f8_e4m3fn, backend: Emily.Backend)
    assert values(f.(x, x)) == [2.0, 10.0]
  end
end
