defmodule Emily.Tensor.CreationTest do
  use ExUnit.Case, async: true

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.{Constants, Core}

  require Emily.Tensor

  doctest Emily.Tensor.Creation
  doctest Emily.Tensor.Constants

  @types [
    u8: {:u, 8},
    u16: {:u, 16},
    u32: {:u, 32},
    u64: {:u, 64},
    s8: {:s, 8},
    s16: {:s, 16},
    s32: {:s, 32},
    s64: {:s, 64},
    f16: {:f, 16},
    bf16: {:bf, 16},
    f32: {:f, 32},
    f64: {:f, 64},
    c64: {:c, 64},
    c128: {:c, 128}
  ]

  defp strided(t), do: Core.wrap(Native.transpose(t.ref, Enum.reverse(T.axes(t))))

  describe "tensor/2 type inference" do
    test "literals" do
      assert T.type(T.tensor(1)) == {:s, 32}
      assert T.type(T.tensor(1.0)) == {:f, 32}
      assert T.type(T.tensor(true)) == {:u, 8}
      assert T.type(T.tensor(:nan)) == {:f, 32}
      assert T.type(T.tensor(Emily.Complex.new(1, 2))) == {:c, 64}
    end

    test "lists merge their element types" do
      assert T.type(T.tensor([1, 2.0])) == {:f, 32}
      assert T.type(T.tensor([true, 2])) == {:s, 32}
      assert T.type(T.tensor([true, false])) == {:u, 8}
      assert T.type(T.tensor([1, Emily.Complex.new(0, 1)])) == {:c, 64}
      assert T.type(T.tensor([[1, 2], [3, :infinity]])) == {:f, 32}
      assert T.to_list(T.tensor([true, 2])) == [1, 2]
      assert T.to_list(T.tensor([1, 2.5])) == [1.0, 2.5]
    end

    test "nested lists give the shape" do
      t = T.tensor([[[1, 2, 3], [4, 5, 6]]])
      assert T.shape(t) == {1, 2, 3}
      assert T.to_list(t) == [[[1, 2, 3], [4, 5, 6]]]
      assert T.shape(T.tensor([[1]])) == {1, 1}
    end

    test "integer literals wrap" do
      assert T.to_number(T.tensor(300, type: :s8)) == 44
      assert T.to_number(T.tensor(-1, type: :u8)) == 255
      assert T.to_number(T.tensor(2_147_483_648)) == -2_147_483_648
      assert T.to_list(T.tensor([256, 257], type: :u8)) == [0, 1]
      assert T.to_number(T.tensor(2 ** 40, type: :s64)) == 2 ** 40
    end

    test "floats round to the type and overflow to infinity" do
      assert T.to_number(T.tensor(1.0e6, type: :f16)) == :infinity
      assert T.to_number(T.tensor(-1.0e40, type: :f32)) == :neg_infinity
      assert T.to_number(T.tensor(0.1, type: :f16)) == 0.0999755859375
      assert T.to_number(T.tensor(1.0e300)) == :infinity
    end

    test "floats given to integer types truncate" do
      assert T.to_list(T.tensor([1.7, -1.7], type: :s32)) == [1, -1]
    end

    test "a tensor is returned as is; its type must agree" do
      t = T.tensor([1, 2])
      assert T.tensor(t) == t
      assert T.tensor(t, type: :s32) == t

      assert_raise ArgumentError, ~r/expects a tensor with type \{:f, 32\}/, fn ->
        T.tensor(t, type: :f32)
      end
    end

    test "names: only nil names" do
      assert T.shape(T.tensor([[1, 2]], names: [nil, nil])) == {1, 2}
      assert_raise ArgumentError, ~r/named axes/, fn -> T.tensor([1], names: [:x]) end
      assert_raise ArgumentError, ~r/invalid names/, fn -> T.tensor([1], names: [nil, nil]) end
    end
  end

  describe "tensor/2 errors" do
    test "ragged lists" do
      assert_raise ArgumentError, ~r/lists have different shapes/, fn ->
        T.tensor([[1, 2, 3], [1, 2]])
      end

      assert_raise ArgumentError, ~r/lists have different shapes/, fn -> T.tensor([[1], 2]) end
      assert_raise ArgumentError, ~r/lists have different shapes/, fn -> T.tensor([1, [2]]) end

      assert_raise ArgumentError, ~r/lists have different shapes/, fn ->
        T.tensor([[[1, 2]], [[1, 2], [3, 4]]])
      end
    end

    test "empty lists" do
      assert_raise ArgumentError, "cannot build an empty tensor", fn -> T.tensor([]) end
      assert_raise ArgumentError, "cannot build an empty tensor", fn -> T.tensor([[], []]) end
    end

    test "non-numbers" do
      assert_raise ArgumentError, "cannot infer the numerical type of :error", fn ->
        T.tensor([:error])
      end

      assert_raise ArgumentError, ~r/invalid value given/, fn -> T.tensor("abc") end
      assert_raise ArgumentError, fn -> T.tensor([1, "a"], type: :f32) end
    end

    test "options and types" do
      assert_raise ArgumentError, ~r/unknown keys \[:typo\]/, fn -> T.tensor(1, typo: 1) end
      assert_raise ArgumentError, ~r/invalid numerical type/, fn -> T.tensor(1, type: :f128) end
      assert_raise ArgumentError, ~r/invalid numerical type/, fn -> T.tensor(1, type: {:x, 8}) end
      assert_raise ArgumentError, ~r/not supported/, fn -> T.tensor(1, type: {:f, 8}) end
      assert_raise ArgumentError, ~r/not supported/, fn -> T.tensor(1, type: :u4) end
    end
  end

  describe "round trips" do
    test "every type: tensor -> to_list / to_binary -> from_binary" do
      for {name, type} <- @types do
        values =
          case type do
            {:u, bits} ->
              [0, 1, 2 ** bits - 1, 7]

            {:s, bits} ->
              [-(2 ** (bits - 1)), -1, 0, 2 ** (bits - 1) - 1]

            {:c, _} ->
              [
                Emily.Complex.new(1.5, -2.0),
                Emily.Complex.new(:nan, :infinity),
                Emily.Complex.new(-0.0, 0.0),
                Emily.Complex.new(:neg_infinity, 3.0)
              ]

            _ ->
              [1.5, -0.0, :nan, :infinity, :neg_infinity, -3.0]
          end

        t = T.tensor(values, type: type)
        assert T.type(t) == type
        assert T.to_list(t) == values, "#{name}"
        assert T.to_flat_list(t) == values
        assert T.byte_size(t) == length(values) * div(elem(type, 1), 8)
        bin = T.to_binary(t)
        assert byte_size(bin) == T.byte_size(t)
        assert T.to_list(T.from_binary(bin, type)) == values
        assert T.to_list(apply(T, name, [values])) == values
        [first | _] = values
        assert T.to_number(T.tensor(first, type: type)) == first
      end
    end

    test "negative zero survives" do
      # built at runtime: the compiler folds a -0.0 literal into 0.0 on OTP 25
      <<neg_zero::float-64>> = <<0x8000000000000000::64>>

      for type <- [:f16, :bf16, :f32, :f64] do
        assert [x] = T.to_flat_list(T.tensor([neg_zero], type: type))
        assert <<1::1, _::63>> = <<x::float-64>>
      end
    end

    test "f16 and bf16 decode every pattern like numpy" do
      bin = for b <- 0..0xFFFF, into: <<>>, do: <<b::16-native>>
      f16 = T.to_flat_list(T.from_binary(bin, :f16))
      assert Enum.count(f16, &(&1 == :nan)) == 2 * 1023
      assert Enum.count(f16, &(&1 == :infinity)) == 1
      assert Enum.at(f16, 0x3C00) == 1.0
      assert Enum.at(f16, 0x0001) == 5.960464477539063e-8
      assert Enum.at(f16, 0x7BFF) == 65504.0
      assert Enum.at(f16, 0xC000) == -2.0

      # against the engine's own conversion f16 -> f64
      via_engine = T.from_binary(bin, :f16) |> T.as_type(:f64) |> T.to_flat_list()
      assert f16 == via_engine

      bf16 = T.from_binary(bin, :bf16)
      assert T.to_flat_list(bf16) == bf16 |> T.as_type(:f64) |> T.to_flat_list()
    end

    test "strided views read in logical order" do
      t = T.iota({2, 3, 4})
      v = strided(t)
      assert T.shape(v) == {4, 3, 2}
      expected = for k <- 0..3, do: for(j <- 0..2, do: for(i <- 0..1, do: i * 12 + j * 4 + k))
      assert T.to_list(v) == expected
      assert T.to_flat_list(v, limit: 3) == [0, 12, 4]
      assert T.to_binary(v, limit: 2) == <<0::32-native, 12::32-native>>

      assert T.to_flat_list(Core.wrap(Native.slice(v.ref, [3, 2, 1], [4, 3, 2], [1, 1, 1]))) == [
               23
             ]
    end
  end

  describe "conversions" do
    test "to_list raises on scalars, to_number on non-scalars" do
      assert_raise ArgumentError, ~r/cannot convert a scalar tensor to a list/, fn ->
        T.to_list(T.tensor(1))
      end

      assert_raise ArgumentError, "cannot convert tensor of shape {1} to number", fn ->
        T.to_number(T.tensor([1]))
      end

      assert T.to_number(3) == 3
      assert T.to_number(T.tensor(:nan, type: :f64)) == :nan
      assert T.to_number(T.tensor(Emily.Complex.new(1, 2))) == Emily.Complex.new(1.0, 2.0)
    end

    test "limits" do
      t = T.iota({3, 4})
      assert T.to_flat_list(t, limit: 5) == [0, 1, 2, 3, 4]
      assert T.to_flat_list(t, limit: 100) == Enum.to_list(0..11)
      assert T.to_flat_list(t, limit: 0) == []
      assert T.to_binary(t, limit: 1) == <<0::32-native>>
      assert T.to_flat_list(5) == [5]
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.to_binary(t, size: 1) end
    end

    test "from_binary errors" do
      assert_raise ArgumentError, "cannot build an empty tensor", fn ->
        T.from_binary(<<>>, :u8)
      end

      assert_raise ArgumentError, "binary does not match the given size", fn ->
        T.from_binary(<<1, 2, 3>>, :f32)
      end

      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.from_binary(<<1>>, :u8, foo: 1) end
    end

    test "to_tensor" do
      assert T.to_list(T.to_tensor(T.tensor([1]))) == [1]
      assert T.type(T.to_tensor(1.0)) == {:f, 32}
      assert T.type(T.to_tensor(Emily.Complex.new(1))) == {:c, 64}

      assert_raise ArgumentError, ~r/expected a %Emily.Tensor\{\} or a number, got: nil/, fn ->
        T.to_tensor(nil)
      end
    end

    test "to_batched" do
      t = T.iota({5, 2})
      batches = T.to_batched(t, 2) |> Enum.map(&T.to_list/1)
      assert batches == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [0, 1]]]

      batches = T.to_batched(t, 2, leftover: :discard) |> Enum.map(&T.to_list/1)
      assert batches == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]

      assert T.to_batched(t, 5) |> Enum.map(&T.shape/1) == [{5, 2}]

      # a batch larger than the axis cycles through it
      assert T.to_batched(T.tensor([1, 2]), 5) |> Enum.map(&T.to_list/1) == [[1, 2, 1, 2, 1]]

      assert T.to_batched(strided(T.iota({2, 3})), 2) |> Enum.map(&T.to_list/1) ==
               [[[0, 3], [1, 4]], [[2, 5], [0, 3]]]

      assert_raise ArgumentError, ~r/cannot batch scalar tensor/, fn ->
        T.to_batched(T.tensor(1), 1)
      end

      assert_raise ArgumentError, ~r/leftover/, fn -> T.to_batched(t, 2, leftover: :x) end
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.to_batched(t, 2, foo: 1) end
    end
  end

  describe "metadata" do
    test "shape, rank, size, axes, axis_size" do
      t = T.iota({2, 3, 4})
      assert T.shape(t) == {2, 3, 4}
      assert T.rank(t) == 3
      assert T.size(t) == 24
      assert T.flat_size(t) == 24
      assert T.axes(t) == [0, 1, 2]
      assert T.axis_size(t, 1) == 3
      assert T.axis_size(t, -3) == 2
      assert T.axis_size({7, 8}, 1) == 8
      assert T.byte_size(t) == 96
      assert T.bit_size(t) == 768
      assert T.byte_size(T.tensor([1], type: :c128)) == 16
      assert T.shape(Emily.Complex.new(1)) == {}
      assert T.type(Emily.Complex.new(1)) == {:c, 64}
      assert T.size({}) == 1
      assert T.axes({}) == []

      assert_raise ArgumentError, ~r/given axis \(3\) invalid for shape with rank 3/, fn ->
        T.axis_size(t, 3)
      end

      assert_raise ArgumentError, ~r/expected a shape/, fn -> T.shape("something else") end

      assert_raise ArgumentError, ~r/invalid dimension in axis 2/, fn ->
        T.shape({1, 2, :blep})
      end
    end

    test "compatible?" do
      assert T.compatible?(T.tensor(1), 2)
      refute T.compatible?(T.tensor(1), 2.0)
      assert T.compatible?(T.iota({2}), strided(T.iota({2})))
    end

    test "is_tensor guard" do
      check = fn
        x when T.is_tensor(x) -> true
        _ -> false
      end

      assert check.(T.tensor(1))
      assert check.(1.5)
      assert check.(Emily.Complex.new(1))
      refute check.([1])
      refute check.(:nan)
    end
  end

  describe "casts" do
    test "as_type" do
      t = T.tensor([1, 2])
      assert T.as_type(t, :s32) == t
      assert T.to_list(T.as_type(T.tensor([-1.9, 2.9, :nan]), :s8)) == [-1, 2, 0]
      assert T.to_list(T.as_type(T.tensor([:infinity, :neg_infinity]), :u8)) == [255, 0]
      assert T.to_list(T.as_type(T.tensor([Emily.Complex.new(1, 2)]), :f32)) == [1.0]
      assert T.to_list(T.as_type(T.tensor([3]), :c64)) == [Emily.Complex.new(3.0, 0.0)]
      assert T.to_list(T.as_type(strided(T.iota({2, 2})), :f64)) == [[0.0, 2.0], [1.0, 3.0]]
      assert T.to_number(T.as_type(1.0e6, :f16)) == :infinity
      assert_raise ArgumentError, ~r/invalid numerical type/, fn -> T.as_type(t, :x) end
    end

    test "bitcast" do
      assert T.to_list(T.bitcast(T.tensor([1.0], type: :f32), :u32)) == [0x3F800000]
      assert T.to_list(T.bitcast(T.tensor([-1], type: :s8), :u8)) == [255]
      assert T.to_list(T.bitcast(T.tensor([0x3C00], type: :u16), :f16)) == [1.0]
      assert T.to_list(T.bitcast(T.tensor([0x3F80], type: :u16), :bf16)) == [1.0]

      assert_raise ArgumentError, ~r/does not support complex/, fn ->
        T.bitcast(T.tensor(Emily.Complex.new(1.0, 2.0)), :s64)
      end

      assert_raise ArgumentError, ~r/width must match/, fn -> T.bitcast(T.tensor([1]), :f64) end
    end
  end

  describe "constructors" do
    test "iota" do
      assert T.to_list(T.iota({2, 3})) == [[0, 1, 2], [3, 4, 5]]
      assert T.to_list(T.iota({2, 3}, axis: 0)) == [[0, 0, 0], [1, 1, 1]]
      assert T.to_list(T.iota({2, 3}, axis: 1, type: :f16)) == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
      assert T.to_list(T.iota(T.tensor([[1.0, 2.0]]))) == [[0, 1]]
      assert T.type(T.iota(T.tensor([[1.0, 2.0]]))) == {:s, 32}

      for {_, type} <- @types do
        t = T.iota({4}, type: type)
        assert T.type(t) == type
        assert t |> T.as_type(:f64) |> T.to_list() == [0.0, 1.0, 2.0, 3.0]
      end

      assert T.to_list(T.iota({300}, type: :u8)) |> Enum.at(299) == 43
      assert_raise ArgumentError, ~r/given axis/, fn -> T.iota({2}, axis: 1) end
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.iota({2}, axes: [0]) end
    end

    test "eye" do
      assert T.to_list(T.eye(3)) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
      assert T.to_list(T.eye({2, 3}, type: :f32)) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
      assert T.to_list(T.eye(T.iota({2, 1}))) == [[1], [0]]
      assert T.type(T.eye(2, type: :c64)) == {:c, 64}
      assert_raise ArgumentError, ~r/at least 2 dimensions/, fn -> T.eye({}) end
    end

    test "fill" do
      assert T.to_list(T.fill(T.iota({2, 2}), 7)) == [[7, 7], [7, 7]]
      assert T.to_list(T.fill(T.tensor([1, 2], type: :u8), 300)) == [44, 44]
      assert T.to_list(T.fill(T.tensor([1, 2]), :nan, type: :f32)) == [:nan, :nan]
      assert T.to_list(T.fill(T.tensor([1.0]), 2.5)) == [2.5]
      assert T.to_number(T.fill(5, 1)) == 1
    end

    test "tri, tril, triu" do
      assert T.to_list(T.tri(2, 3, k: 5)) == [[1, 1, 1], [1, 1, 1]]
      assert T.to_list(T.tri(2, 3, k: -5)) == [[0, 0, 0], [0, 0, 0]]

      t = T.iota({2, 2, 3}, type: :f32)

      assert T.to_list(T.tril(t)) ==
               [[[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], [[6.0, 0.0, 0.0], [9.0, 10.0, 0.0]]]

      assert T.to_list(T.triu(t, k: 1)) ==
               [[[0.0, 1.0, 2.0], [0.0, 0.0, 5.0]], [[0.0, 7.0, 8.0], [0.0, 0.0, 11.0]]]

      assert T.to_list(T.tril(strided(T.iota({2, 2})))) == [[0, 0], [1, 3]]
      assert T.type(T.triu(T.tensor([[1, 2]], type: :c64))) == {:c, 64}

      assert_raise ArgumentError, ~r/tril\/2 expects a tensor with at least 2 dimensions/, fn ->
        T.tril(T.iota({3}))
      end

      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.triu(T.iota({2, 2}), j: 1) end
    end

    test "linspace" do
      assert T.to_list(T.linspace(0, 1, n: 1)) == [0.0]
      assert T.to_list(T.linspace(-1.0, 1.0, n: 3, type: :f64)) == [-1.0, 0.0, 1.0]

      assert T.to_list(T.linspace(T.tensor(0), 4, n: 3, endpoint: false, type: :f16)) ==
               [0.0, 1.3330078125, 2.666015625]

      assert_raise ArgumentError, ~r/expected n to be a positive integer/, fn ->
        T.linspace(0, 1)
      end

      assert_raise ArgumentError, ~r/scalar/, fn -> T.linspace(T.tensor([0]), 1, n: 2) end
    end

    test "shorthands" do
      for {name, type} <- @types do
        assert T.type(apply(T, name, [[1, 2]])) == type
        assert T.type(apply(T, name, [1])) == type
      end
    end
  end

  describe "constants" do
    test "bit patterns" do
      assert T.to_binary(Constants.pi(:f32)) == <<0x40490FDB::32-native>>
      assert T.to_binary(Constants.e(:bf16)) == <<0x402D::16-native>>
      assert T.to_binary(Constants.euler_gamma(:bf16)) == <<0x3F13::16-native>>
      assert T.to_binary(Constants.euler_gamma(:f16)) == <<0x389E::16-native>>
      assert T.to_number(Constants.pi(:f64)) == :math.pi()
      assert T.to_number(Constants.e(:f64)) == :math.exp(1)
      assert T.to_number(Constants.epsilon(:f32)) == :math.pow(2, -23)
      assert T.to_number(Constants.epsilon(:bf16)) == :math.pow(2, -7)
      assert T.to_number(Constants.smallest_positive_normal(:bf16)) == :math.pow(2, -126)
      assert T.to_number(Constants.max_finite(:bf16)) == 3.3895313892515355e38
      assert T.to_number(Constants.min_finite(:f64)) == -1.7976931348623157e308
      assert T.to_number(Constants.max_finite(:u64)) == 2 ** 64 - 1
      assert T.to_number(Constants.min(:s64)) == -(2 ** 63)
      assert T.to_number(Constants.min(:bf16)) == :neg_infinity
      assert T.to_number(Constants.nan()) == :nan
      assert T.to_number(Constants.infinity()) == :infinity
      assert T.to_number(Constants.neg_infinity(:f16)) == :neg_infinity
      assert T.type(Constants.pi()) == {:f, 32}
      assert T.type(Constants.i()) == {:c, 64}
      assert T.type(Constants.i(type: :c128)) == {:c, 128}
    end

    test "errors" do
      for fun <- [
            :pi,
            :e,
            :euler_gamma,
            :nan,
            :infinity,
            :neg_infinity,
            :epsilon,
            :smallest_positive_normal
          ] do
        assert_raise ArgumentError, "only floating types are supported, got: {:s, 32}", fn ->
          apply(Constants, fun, [:s32])
        end
      end

      assert_raise ArgumentError, ~r/unknown keys/, fn -> Constants.pi(:f32, foo: 1) end
      assert_raise ArgumentError, ~r/only real types/, fn -> Constants.max_finite(:c64) end
    end
  end
end
