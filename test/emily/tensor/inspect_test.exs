defmodule Emily.Tensor.InspectTest do
  use ExUnit.Case, async: true

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.{Core, Creation, Format}

  doctest Emily.Tensor.Format

  @python "/usr/bin/python3"

  defp numpy?, do: EmilyTest.Numpy.available?()

  describe "layout" do
    test "scalar" do
      assert inspect(T.tensor(123)) == """
             #Emily.Tensor<
               s32
               123
             >\
             """

      assert inspect(T.tensor(-1.5, type: :f64)) == """
             #Emily.Tensor<
               f64
               -1.5
             >\
             """
    end

    test "n-dimensional" do
      assert inspect(T.tensor([[1, 2, 3], [4, 5, 6]])) == """
             #Emily.Tensor<
               s32[2][3]
               [
                 [1, 2, 3],
                 [4, 5, 6]
               ]
             >\
             """

      assert inspect(T.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])) == """
             #Emily.Tensor<
               f32[2][3]
               [
                 [1.0, 2.0, 3.0],
                 [4.0, 5.0, 6.0]
               ]
             >\
             """

      assert inspect(T.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], type: :u8)) == """
             #Emily.Tensor<
               u8[2][2][2]
               [
                 [
                   [1, 2],
                   [3, 4]
                 ],
                 [
                   [5, 6],
                   [7, 8]
                 ]
               ]
             >\
             """

      assert inspect(T.tensor([[1], [2]])) == """
             #Emily.Tensor<
               s32[2][1]
               [
                 [1],
                 [2]
               ]
             >\
             """
    end

    test "limit" do
      assert inspect(T.tensor([1, 2]), limit: :infinity) == """
             #Emily.Tensor<
               s32[2]
               [1, 2]
             >\
             """

      assert inspect(T.tensor([[1, 2], [3, 4]]), limit: 3) == """
             #Emily.Tensor<
               s32[2][2]
               [
                 [1, 2],
                 [3, ...]
               ]
             >\
             """

      assert inspect(T.tensor([[1, 2], [3, 4], [5, 6]]), limit: 3) == """
             #Emily.Tensor<
               s32[3][2]
               [
                 [1, 2],
                 [3, ...],
                 ...
               ]
             >\
             """

      assert inspect(T.tensor([[1, 2], [3, 4], [5, 6]]), limit: 4) == """
             #Emily.Tensor<
               s32[3][2]
               [
                 [1, 2],
                 [3, 4],
                 ...
               ]
             >\
             """

      assert inspect(T.tensor([1, 2, 3]), limit: 0) == """
             #Emily.Tensor<
               s32[3]
               [...]
             >\
             """
    end

    test "the default limit is 50 numbers" do
      assert inspect(T.iota({50})) =~ "45, 46, 47, 48, 49]"
      refute inspect(T.iota({50})) =~ "..."
      assert inspect(T.iota({51})) =~ "48, 49, ...]"

      assert inspect(T.iota({10, 10})) == """
             #Emily.Tensor<
               s32[10][10]
               [
                 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                 [10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
                 [20, 21, 22, 23, 24, 25, 26, 27, 28, 29],
                 [30, 31, 32, 33, 34, 35, 36, 37, 38, 39],
                 [40, 41, 42, 43, 44, 45, 46, 47, 48, 49],
                 ...
               ]
             >\
             """

      assert inspect(T.iota({3, 7, 5})) =~ """
                 [
                   [35, 36, 37, 38, 39],
                   [40, 41, 42, 43, 44],
                   [45, 46, 47, 48, 49],
                   ...
                 ],
                 ...
               ]
             >\
             """

      # large tensors read only what they print
      assert inspect(T.iota({1000, 1000})) =~ "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"
    end

    test "nested inside other terms (indentation follows the container)" do
      assert inspect([T.tensor(1)]) == """
             [#Emily.Tensor<
                 s32
                 1
               >]\
             """

      assert inspect(%{a: T.tensor([1, 2], type: :s8)}) == """
             %{a: #Emily.Tensor<
                 s8[2]
                 [1, 2]
               >}\
             """
    end

    test "empty tensors" do
      empty = Core.wrap(Native.from_binary(<<>>, [0], {:f, 32}))

      assert inspect(empty) == """
             #Emily.Tensor<
               f32[0]
               []
             >\
             """

      empty = Core.wrap(Native.from_binary(<<>>, [2, 0], {:s, 32}))

      assert inspect(empty) == """
             #Emily.Tensor<
               s32[2][0]
               [
                 [],
                 []
               ]
             >\
             """

      empty = Core.wrap(Native.from_binary(<<>>, [0, 3], {:s, 32}))
      assert inspect(empty) =~ "s32[0][3]\n  []\n>"
    end

    test "strided views print in logical order" do
      t = Core.wrap(Native.transpose(T.iota({2, 3}).ref, [1, 0]))

      assert inspect(t) == """
             #Emily.Tensor<
               s32[3][2]
               [
                 [0, 3],
                 [1, 4],
                 [2, 5]
               ]
             >\
             """

      rev = Core.wrap(Native.slice(T.iota({10}).ref, [1], [10], [3]))
      assert inspect(rev) =~ "s32[3]\n  [1, 4, 7]"
    end
  end

  describe "non-finite values" do
    test "bf16" do
      bin = <<0xFF80::16-native, 0x7F80::16-native, 0xFFC1::16-native, 0xFF81::16-native>>
      assert inspect(T.from_binary(bin, {:bf, 16})) =~ "bf16[4]\n  [-Inf, Inf, NaN, NaN]"
    end

    test "f16" do
      bin = <<0xFC00::16-native, 0x7C00::16-native, 0x7C01::16-native, 0xFE00::16-native>>
      assert inspect(T.from_binary(bin, {:f, 16})) =~ "f16[4]\n  [-Inf, Inf, NaN, NaN]"
    end

    test "f32" do
      bin =
        <<0xFF800000::32-native, 0x7F800000::32-native, 0xFF800001::32-native,
          0xFFC00001::32-native>>

      assert inspect(T.from_binary(bin, {:f, 32})) =~ "f32[4]\n  [-Inf, Inf, NaN, NaN]"

      bin =
        <<0x7F800001::32-native, 0xFF800002::32-native, 0x7FC00000::32-native,
          0xFFC00000::32-native>>

      assert inspect(T.from_binary(bin, {:f, 32})) =~ "f32[4]\n  [NaN, NaN, NaN, NaN]"
    end

    test "f64" do
      bin =
        <<0xFFF0000000000000::64-native, 0x7FF0000000000000::64-native,
          0x7FF0000000000001::64-native, 0x7FF8000000000001::64-native>>

      assert inspect(T.from_binary(bin, {:f, 64})) =~ "f64[4]\n  [-Inf, Inf, NaN, NaN]"
    end

    test "complex" do
      t =
        T.tensor([
          Emily.Complex.new(1.0, 2.0),
          Emily.Complex.new(1.0, -1.0),
          Emily.Complex.new(1.0, 0.0),
          Emily.Complex.new(-0.0, -0.0),
          Emily.Complex.new(:infinity, 0.0),
          Emily.Complex.new(:nan, :neg_infinity),
          Emily.Complex.new(0.1, :nan)
        ])

      assert inspect(t) =~
               "c64[7]\n  [1.0+2.0i, 1.0-1.0i, 1.0+0.0i, -0.0-0.0i, Inf+0.0i, NaN-Infi, 0.1+NaNi]"

      t = T.tensor([Emily.Complex.new(0.1, 1.0e3)], type: :c128)
      assert inspect(t) =~ "c128[1]\n  [0.1+1.0e3i]"
    end
  end

  describe "number formatting" do
    test "integers" do
      assert inspect(T.tensor([-128, 0, 127], type: :s8)) =~ "[-128, 0, 127]"

      assert inspect(T.tensor([18_446_744_073_709_551_615], type: :u64)) =~
               "[18446744073709551615]"

      assert inspect(T.tensor([-9_223_372_036_854_775_808], type: :s64)) =~
               "[-9223372036854775808]"
    end

    test "f32 known strings" do
      cases = [
        {1000.0, "1e3"},
        {1200.0, "1.2e3"},
        {100.0, "100.0"},
        {120.0, "120.0"},
        {123_456.0, "123456.0"},
        {16_777_216.0, "16777216.0"},
        {0.001, "0.001"},
        {0.0001, "1e-4"},
        {1 / 3, "0.33333334"},
        {3.4028234663852886e38, "3.4028235e38"},
        {-2.384185791015625e-7, "-2.3841858e-7"},
        {1.0, "1.0"},
        {-1.0, "-1.0"},
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {12.5, "12.5"},
        {0.1, "0.1"},
        {1.0e10, "1e10"},
        {1.5e-45, "1e-45"},
        {1.1754943508222875e-38, "1.1754944e-38"},
        {3.141592653589793, "3.1415927"},
        {0.012, "0.012"},
        {1.0e7, "1e7"},
        {1.0e6, "1e6"},
        {12_345_678.0, "12345678.0"},
        {123_456_789.0, "123456790.0"}
      ]

      {values, expected} = Enum.unzip(cases)
      t = T.tensor(values, type: :f32)
      got = t |> T.to_flat_list() |> Enum.map(&Format.number(&1, {:f, 32}))
      assert got == expected
    end

    test "f16, bf16 known strings" do
      f16 = [
        {65504.0, "6.55e4"},
        {9.765625e-4, "9.77e-4"},
        {6.103515625e-5, "6.104e-5"},
        {5.960464477539063e-8, "6e-8"},
        {1.0e-7, "1e-7"},
        {3.14159, "3.14"},
        {2048.0, "2048.0"},
        {1000.0, "1e3"},
        {0.5, "0.5"}
      ]

      {values, expected} = Enum.unzip(f16)

      got =
        T.tensor(values, type: :f16) |> T.to_flat_list() |> Enum.map(&Format.number(&1, {:f, 16}))

      assert got == expected

      bf16 = [
        {1.0, "1.0"},
        {3.140625, "3.14"},
        {1.0e3, "1e3"},
        {0.0078125, "0.0078"},
        {-2.0, "-2.0"}
      ]

      {values, expected} = Enum.unzip(bf16)

      got =
        T.tensor(values, type: :bf16)
        |> T.to_flat_list()
        |> Enum.map(&Format.number(&1, {:bf, 16}))

      assert got == expected
    end

    test "f64 uses Float.to_string/1" do
      cases = [
        {1000.0, "1.0e3"},
        {100.0, "100.0"},
        {0.0001, "0.0001"},
        {1.2e-4, "1.2e-4"},
        {1.0e-128, "1.0e-128"},
        {2.220446049250313e-16, "2.220446049250313e-16"},
        {1.0e16, "1.0e16"},
        {-0.0, "-0.0"},
        {0.30000000000000004, "0.30000000000000004"}
      ]

      {values, expected} = Enum.unzip(cases)
      assert inspect(T.tensor(values, type: :f64), limit: :infinity) =~ Enum.join(expected, ", ")
    end

    test "layout rules" do
      assert Format.layout("125", -1) == "12.5"
      assert Format.layout("1", 3) == "1e3"
      assert Format.layout("1", 2) == "100.0"
      assert Format.layout("12", 2) == "1.2e3"
      assert Format.layout("12", 1) == "120.0"
      assert Format.layout("1", -3) == "0.001"
      assert Format.layout("1", -4) == "1e-4"
      assert Format.layout("15", -4) == "0.0015"
      assert Format.layout("15", -5) == "1.5e-4"
      assert Format.layout("45", 1) == "450.0"
      assert Format.layout("1", 0) == "1.0"
    end
  end

  # Parses formatted strings, rounds them (through f64) to `type` with the
  # engine and returns the bits.
  defp round_trip_bits(strings, type) do
    floats =
      Enum.map(strings, fn s ->
        {x, ""} = Float.parse(s)
        x
      end)

    bits = elem(type, 1)

    T.tensor(floats, type: :f64)
    |> T.as_type(type)
    |> T.to_binary()
    |> then(fn bin -> for <<b::size(bits)-native <- bin>>, do: b end)
  end

  defp formatted(bits_list, type) do
    bits = elem(type, 1)
    bin = for b <- bits_list, into: <<>>, do: <<b::size(bits)-native>>
    bin |> Creation.decode(type) |> Enum.map(&Format.number(&1, type))
  end

  # A shorter candidate (one digit less, rounded down or up) never round-trips.
  defp shorter_candidates(strings) do
    Enum.flat_map(strings, fn s ->
      {sign, s} =
        if String.starts_with?(s, "-"), do: {"-", String.trim_leading(s, "-")}, else: {"", s}

      {x, ""} = Float.parse(s)

      digits =
        s |> String.split("e") |> hd() |> String.replace(".", "") |> String.trim_leading("0")

      digits = String.trim_trailing(digits, "0")
      n = byte_size(digits)

      if n <= 1 or x == 0.0 do
        []
      else
        e10 = floor(:math.log10(x))
        p = e10 - (n - 1) + 1
        d = div(String.to_integer(digits), 10)
        for c <- [d, d + 1], do: sign <> "#{c}e#{p}"
      end
    end)
  end

  test "every f16 value round-trips through its printed form" do
    patterns = Enum.to_list(0..0x7BFF) ++ Enum.to_list(0x8000..0xFBFF)
    strings = formatted(patterns, {:f, 16})
    assert round_trip_bits(strings, {:f, 16}) == patterns

    # shortest: one digit less does not round-trip (checked on the positives)
    positives = Enum.take(strings, 0x7C00)
    cands = shorter_candidates(positives)
    pos_bits = MapSet.new(0..0x7BFF)
    back = round_trip_bits(cands, {:f, 16})

    # a shorter candidate may land on some *other* value, never the original
    pairs =
      positives
      |> Enum.zip(0..0x7BFF)
      |> Enum.flat_map(fn {s, b} -> List.duplicate(b, length(shorter_candidates([s]))) end)

    assert length(pairs) == length(back)
    assert Enum.zip(pairs, back) |> Enum.all?(fn {orig, got} -> orig != got end)
    assert MapSet.size(pos_bits) == 0x7C00
  end

  test "every f16 value prints the digits of Nx's reference table" do
    # lines of nx/test/fixtures/f16_table.txt (pattern: shortest digits)
    table = %{
      0x0001 => "6E-8",
      0x0004 => "2.4E-7",
      0x0013 => "1.13E-6",
      0x00AA => "1.013E-5",
      0x03FF => "6.1E-5",
      0x0400 => "6.104E-5"
    }

    for {bits, expected} <- table do
      [got] = formatted([bits], {:f, 16})
      {a, ""} = Float.parse(String.replace(expected, "E", "e"))
      {b, ""} = Float.parse(got)
      assert a == b, "0x#{Integer.to_string(bits, 16)}: #{got} vs #{expected}"

      digits = fn s ->
        s |> String.split(~r/e/i) |> hd() |> String.replace(".", "") |> String.trim("0")
      end

      assert digits.(got) == digits.(expected)
    end

    if numpy?() do
      # numpy's shortest unique digits (Dragon4) for every positive f16
      {text, 0} =
        System.cmd(@python, [
          "-c",
          """
          import numpy as np
          b = np.arange(1, 0x7c00, dtype=np.uint16).view(np.float16)
          print('\\n'.join(np.format_float_scientific(x, unique=True, trim='-') for x in b))
          """
        ])

      expected = String.split(text, "\n", trim: true)
      got = formatted(Enum.to_list(1..0x7BFF), {:f, 16})

      mismatches =
        Enum.zip(got, expected)
        |> Enum.reject(fn {g, e} ->
          {a, ""} = Float.parse(g)
          {b, ""} = Float.parse(e)
          a == b
        end)

      assert mismatches == []
    end
  end

  test "every bf16 value round-trips through its printed form" do
    patterns = Enum.to_list(0..0x7F7F) ++ Enum.to_list(0x8000..0xFF7F)
    strings = formatted(patterns, {:bf, 16})
    assert round_trip_bits(strings, {:bf, 16}) == patterns
  end

  test "random f32 values round-trip and match numpy's shortest digits" do
    :rand.seed(:exsss, {1, 2, 3})
    patterns = for _ <- 1..20_000, do: :rand.uniform(0x7F800000) - 1
    patterns = patterns ++ Enum.to_list(0..200) ++ Enum.to_list(0x7F7FFF00..0x7F7FFFFF)
    patterns = patterns ++ for(e <- 1..254, do: Bitwise.bsl(e, 23))
    strings = formatted(patterns, {:f, 32})
    assert round_trip_bits(strings, {:f, 32}) == patterns

    negative = Enum.map(Enum.take(patterns, 500), &Bitwise.bor(&1, 0x80000000))
    assert round_trip_bits(formatted(negative, {:f, 32}), {:f, 32}) == negative

    if numpy?() do
      path = Path.join(System.tmp_dir!(), "emily_f32_#{System.unique_integer([:positive])}.txt")
      File.write!(path, Enum.map_join(patterns, " ", &Integer.to_string/1))

      {text, 0} =
        try do
          System.cmd(@python, [
            "-c",
            """
            import numpy as np, sys
            b = np.array([int(x) for x in open(sys.argv[1]).read().split()], dtype=np.uint32).view(np.float32)
            print('\\n'.join(np.format_float_scientific(x, unique=True, trim='-') for x in b))
            """,
            path
          ])
        after
          File.rm(path)
        end

      expected = String.split(text, "\n", trim: true)

      mismatches =
        Enum.zip([patterns, strings, expected])
        |> Enum.reject(fn {_, g, e} ->
          {a, ""} = Float.parse(g)
          {b, ""} = Float.parse(e)

          digits = fn s ->
            s |> String.split("e") |> hd() |> String.replace(".", "") |> String.trim("0")
          end

          a == b and digits.(g) == digits.(e)
        end)

      assert mismatches == []
    end
  end
end
