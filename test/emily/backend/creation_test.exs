defmodule Emily.Backend.CreationTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias Emily.Native

  require Nx

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

  defp strided(t), do: wrap(Native.transpose(t.data.ref, Enum.reverse(Nx.axes(t))))

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
                Complex.new(1.5, -2.0),
                Complex.new(:nan, :infinity),
                Complex.new(-0.0, 0.0),
                Complex.new(:neg_infinity, 3.0)
              ]

            _ ->
              [1.5, -0.0, :nan, :infinity, :neg_infinity, -3.0]
          end

        t = Nx.tensor(values, type: type)
        assert Nx.type(t) == type
        assert Nx.to_list(t) == values, "#{name}"
        assert Nx.to_flat_list(t) == values
        assert Nx.byte_size(t) == length(values) * div(elem(type, 1), 8)
        bin = Nx.to_binary(t)
        assert byte_size(bin) == Nx.byte_size(t)
        assert Nx.to_list(Nx.from_binary(bin, type)) == values
        assert Nx.to_list(apply(Nx, name, [values])) == values
        [first | _] = values
        assert Nx.to_number(Nx.tensor(first, type: type)) == first
      end
    end

    test "negative zero survives" do
      # built at runtime: the compiler folds a -0.0 literal into 0.0 on OTP 25
      <<neg_zero::float-64>> = <<0x8000000000000000::64>>

      for type <- [:f16, :bf16, :f32, :f64] do
        assert [x] = Nx.to_flat_list(Nx.tensor([neg_zero], type: type))
        assert <<1::1, _::63>> = <<x::float-64>>
      end
    end

    test "f16 and bf16 decode every pattern like numpy" do
      bin = for b <- 0..0xFFFF, into: <<>>, do: <<b::16-native>>
      f16 = Nx.to_flat_list(Nx.from_binary(bin, :f16))
      assert Enum.count(f16, &(&1 == :nan)) == 2 * 1023
      assert Enum.count(f16, &(&1 == :infinity)) == 1
      assert Enum.at(f16, 0x3C00) == 1.0
      assert Enum.at(f16, 0x0001) == 5.960464477539063e-8
      assert Enum.at(f16, 0x7BFF) == 65504.0
      assert Enum.at(f16, 0xC000) == -2.0

      # against the engine's own conversion f16 -> f64
      via_engine = Nx.from_binary(bin, :f16) |> Nx.as_type(:f64) |> Nx.to_flat_list()
      assert f16 == via_engine

      bf16 = Nx.from_binary(bin, :bf16)
      assert Nx.to_flat_list(bf16) == bf16 |> Nx.as_type(:f64) |> Nx.to_flat_list()
    end

    test "strided views read in logical order" do
      t = Nx.iota({2, 3, 4})
      v = strided(t)
      assert Nx.shape(v) == {4, 3, 2}
      expected = for k <- 0..3, do: for(j <- 0..2, do: for(i <- 0..1, do: i * 12 + j * 4 + k))
      assert Nx.to_list(v) == expected
      assert Nx.to_flat_list(v, limit: 3) == [0, 12, 4]
      assert Nx.to_binary(v, limit: 2) == <<0::32-native, 12::32-native>>

      assert Nx.to_flat_list(wrap(Native.slice(v.data.ref, [3, 2, 1], [4, 3, 2], [1, 1, 1]))) == [
               23
             ]
    end
  end

  describe "conversions" do
    test "from_binary errors" do
      assert_raise ArgumentError, "cannot build an empty tensor", fn ->
        Nx.from_binary(<<>>, :u8)
      end

      assert_raise ArgumentError, "binary does not match the given size", fn ->
        Nx.from_binary(<<1, 2, 3>>, :f32)
      end

      assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.from_binary(<<1>>, :u8, foo: 1) end
    end
  end

  describe "casts" do
    test "as_type" do
      t = Nx.tensor([1, 2])
      assert Nx.as_type(t, :s32) == t
      assert Nx.to_list(Nx.as_type(Nx.tensor([-1.9, 2.9, :nan]), :s8)) == [-1, 2, 0]
      assert Nx.to_list(Nx.as_type(Nx.tensor([:infinity, :neg_infinity]), :u8)) == [255, 0]
      assert Nx.to_list(Nx.as_type(Nx.tensor([Complex.new(1, 2)]), :f32)) == [1.0]
      assert Nx.to_list(Nx.as_type(Nx.tensor([3]), :c64)) == [Complex.new(3.0, 0.0)]
      assert Nx.to_list(Nx.as_type(strided(Nx.iota({2, 2})), :f64)) == [[0.0, 2.0], [1.0, 3.0]]
      assert Nx.to_number(Nx.as_type(1.0e6, :f16)) == :infinity
      assert_raise ArgumentError, ~r/invalid numerical type/, fn -> Nx.as_type(t, :x) end
    end
  end

  describe "constructors" do
    test "iota" do
      assert Nx.to_list(Nx.iota({2, 3})) == [[0, 1, 2], [3, 4, 5]]
      assert Nx.to_list(Nx.iota({2, 3}, axis: 0)) == [[0, 0, 0], [1, 1, 1]]

      assert Nx.to_list(Nx.iota({2, 3}, axis: 1, type: :f16)) == [
               [0.0, 1.0, 2.0],
               [0.0, 1.0, 2.0]
             ]

      for {_, type} <- @types do
        t = Nx.iota({4}, type: type)
        assert Nx.type(t) == type
        assert t |> Nx.as_type(:f64) |> Nx.to_list() == [0.0, 1.0, 2.0, 3.0]
      end

      assert Nx.to_list(Nx.iota({300}, type: :u8)) |> Enum.at(299) == 43
      assert_raise ArgumentError, ~r/given axis/, fn -> Nx.iota({2}, axis: 1) end
      assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.iota({2}, axes: [0]) end
    end

    test "eye" do
      assert Nx.to_list(Nx.eye(3)) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
      assert Nx.to_list(Nx.eye({2, 3}, type: :f32)) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
      assert Nx.type(Nx.eye(2, type: :c64)) == {:c, 64}
      assert_raise ArgumentError, ~r/at least 2 dimensions/, fn -> Nx.eye({}) end
    end

    test "fill" do
      assert Nx.to_list(Nx.fill(Nx.iota({2, 2}), 7)) == [[7, 7], [7, 7]]
      assert Nx.to_list(Nx.fill(Nx.tensor([1, 2]), :nan, type: :f32)) == [:nan, :nan]
      assert Nx.to_list(Nx.fill(Nx.tensor([1.0]), 2.5)) == [2.5]
    end

    test "tri, tril, triu" do
      assert Nx.to_list(Nx.tri(2, 3, k: 5)) == [[1, 1, 1], [1, 1, 1]]
      assert Nx.to_list(Nx.tri(2, 3, k: -5)) == [[0, 0, 0], [0, 0, 0]]

      t = Nx.iota({2, 2, 3}, type: :f32)

      assert Nx.to_list(Nx.tril(t)) ==
               [[[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], [[6.0, 0.0, 0.0], [9.0, 10.0, 0.0]]]

      assert Nx.to_list(Nx.triu(t, k: 1)) ==
               [[[0.0, 1.0, 2.0], [0.0, 0.0, 5.0]], [[0.0, 7.0, 8.0], [0.0, 0.0, 11.0]]]

      assert Nx.to_list(Nx.tril(strided(Nx.iota({2, 2})))) == [[0, 0], [1, 3]]
      assert Nx.type(Nx.triu(Nx.tensor([[1, 2]], type: :c64))) == {:c, 64}

      assert_raise ArgumentError, ~r/tril\/2 expects a tensor with at least 2 dimensions/, fn ->
        Nx.tril(Nx.iota({3}))
      end

      assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.triu(Nx.iota({2, 2}), j: 1) end
    end
  end
end
