defmodule Emily.Tensor.ShapeOpsTest do
  use ExUnit.Case, async: true

  alias Emily.Tensor, as: T
  alias EmilyTest.Numpy

  # Every @doc example of the module, printed output compared.
  doctest Emily.Tensor.ShapeOps

  @all_types [
    {:u, 8},
    {:u, 16},
    {:u, 32},
    {:u, 64},
    {:s, 8},
    {:s, 16},
    {:s, 32},
    {:s, 64},
    {:f, 16},
    {:bf, 16},
    {:f, 32},
    {:f, 64},
    {:c, 64},
    {:c, 128}
  ]

  defp printed(t), do: inspect(t)
  defp expect(text), do: "#Emily.Tensor<\n" <> text <> ">"

  # A transposed view holding `list` (a 2-D list): the data lives
  # transposed in memory, so every op sees non-unit strides.
  defp strided(list, opts \\ []) do
    list |> transpose_list() |> T.tensor(opts) |> T.transpose()
  end

  defp transpose_list(rows), do: rows |> Enum.zip() |> Enum.map(&Tuple.to_list/1)

  describe "Nx documented examples (printed)" do
    test "pad" do
      tensor = T.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])

      assert printed(T.pad(tensor, 0, [{1, 0, 0}, {1, 1, 0}, {0, 1, 0}])) ==
               expect("""
                 s32[3][4][3]
                 [
                   [
                     [0, 0, 0],
                     [0, 0, 0],
                     [0, 0, 0],
                     [0, 0, 0]
                   ],
                   [
                     [0, 0, 0],
                     [1, 2, 0],
                     [3, 4, 0],
                     [0, 0, 0]
                   ],
                   [
                     [0, 0, 0],
                     [5, 6, 0],
                     [7, 8, 0],
                     [0, 0, 0]
                   ]
                 ]
               """)

      assert printed(T.pad(T.tensor(1), 0, [])) == expect("  s32\n  1\n")

      t =
        T.tensor([
          [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
          [[0, 0, 0], [1, 2, 0], [3, 4, 0], [0, 0, 0]],
          [[0, 0, 0], [5, 6, 0], [7, 8, 0], [0, 0, 0]]
        ])

      assert T.to_list(T.pad(t, 0, [{-1, 0, 0}, {-1, -1, 0}, {0, -1, 0}])) ==
               [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]

      assert T.to_list(T.pad(T.tensor([[0, 1, 2, 3], [0, 4, 5, 6]]), 0, [{0, 0, 0}, {-1, 1, 0}])) ==
               [[1, 2, 3, 0], [4, 5, 6, 0]]

      f = T.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
      padded = T.pad(f, 0.0, [{1, 2, 0}, {1, 0, 0}, {0, 1, 0}])
      assert T.shape(padded) == {5, 3, 3}
      assert T.type(padded) == {:f, 32}
      assert Enum.at(T.to_list(padded), 1) == [[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [3.0, 4.0, 0.0]]
    end

    test "tile, squeeze, new_axis, flatten" do
      a = T.tensor([0, 1, 2])
      assert T.to_list(T.tile(a, [2])) == [0, 1, 2, 0, 1, 2]
      assert T.shape(T.tile(a, [2, 1, 2])) == {2, 1, 6}
      assert T.to_list(T.tile(a, [2, 1])) == [[0, 1, 2], [0, 1, 2]]
      assert T.to_list(T.tile(T.tensor([[1, 2], [3, 4]]), [2])) == [[1, 2, 1, 2], [3, 4, 3, 4]]
      assert T.to_list(T.tile(T.tensor([1, 2, 3, 4]), [4, 1])) == List.duplicate([1, 2, 3, 4], 4)

      assert T.to_list(T.squeeze(T.tensor([[[[1]]], [[[2]]]]))) == [1, 2]
      assert T.to_list(T.squeeze(T.tensor([[1], [2]]), axes: [1])) == [1, 2]

      t = T.tensor([[1, 2, 3], [4, 5, 6]])
      assert T.to_list(T.new_axis(t, 0)) == [[[1, 2, 3], [4, 5, 6]]]
      assert T.to_list(T.new_axis(t, 2)) == [[[1], [2], [3]], [[4], [5], [6]]]
      assert T.to_list(T.flatten(T.iota({16}))) == Enum.to_list(0..15)
      assert T.shape(T.flatten(T.tensor(5))) == {1}
    end

    test "broadcast" do
      assert printed(T.broadcast(T.tensor([1, 2, 3]), {2, 3, 2}, axes: [1])) ==
               expect("""
                 s32[2][3][2]
                 [
                   [
                     [1, 1],
                     [2, 2],
                     [3, 3]
                   ],
                   [
                     [1, 1],
                     [2, 2],
                     [3, 3]
                   ]
                 ]
               """)

      assert T.to_list(T.broadcast(T.tensor([[1], [2]]), T.tensor([[10, 20], [30, 40]]))) ==
               [[1, 1], [2, 2]]

      assert T.to_list(T.broadcast(T.tensor([[1, 2]]), T.tensor([[10, 20], [30, 40]]))) ==
               [[1, 2], [1, 2]]

      assert T.to_list(T.broadcast(T.iota({2, 2}), {2, 2})) == [[0, 1], [2, 3]]
    end

    test "transpose and reverse" do
      assert T.to_list(T.transpose(T.iota({2, 3, 4}))) ==
               [
                 [[0, 12], [4, 16], [8, 20]],
                 [[1, 13], [5, 17], [9, 21]],
                 [[2, 14], [6, 18], [10, 22]],
                 [[3, 15], [7, 19], [11, 23]]
               ]

      assert T.to_list(T.transpose(T.iota({2, 3, 4}), axes: [2, 1, 0])) ==
               T.to_list(T.transpose(T.iota({2, 3, 4})))

      assert printed(T.transpose(T.tensor(1), axes: [])) == expect("  s32\n  1\n")

      assert printed(T.reverse(T.iota({2, 2, 2}, type: :f32), axes: [0, 2])) ==
               expect("""
                 f32[2][2][2]
                 [
                   [
                     [5.0, 4.0],
                     [7.0, 6.0]
                   ],
                   [
                     [1.0, 0.0],
                     [3.0, 2.0]
                   ]
                 ]
               """)

      assert T.to_list(T.reverse(T.tensor([[1, 2, 3], [4, 5, 6]]), axes: [0])) ==
               [[4, 5, 6], [1, 2, 3]]
    end

    test "concatenate and stack" do
      t1 = T.iota({2, 2, 2}, type: :f32)
      t2 = T.iota({1, 2, 2}, type: :u8)
      t3 = T.iota({1, 2, 2}, type: :s64)
      r = T.concatenate([t1, t2, t3], axis: 0)
      assert T.type(r) == {:f, 32}

      assert T.to_list(r) == [
               [[0.0, 1.0], [2.0, 3.0]],
               [[4.0, 5.0], [6.0, 7.0]],
               [[0.0, 1.0], [2.0, 3.0]],
               [[0.0, 1.0], [2.0, 3.0]]
             ]

      r = T.concatenate([T.iota({1, 3, 2}), T.iota({1, 1, 2}), T.iota({1, 2, 2})], axis: 1)
      assert T.to_list(r) == [[[0, 1], [2, 3], [4, 5], [0, 1], [0, 1], [2, 3]]]

      assert T.to_list(T.concatenate({T.tensor([1, 2]), {T.tensor([3, 4]), T.tensor([5, 6])}})) ==
               [1, 2, 3, 4, 5, 6]

      assert printed(T.concatenate([T.tensor([1, 2, 3])])) == expect("  s32[3]\n  [1, 2, 3]\n")
      assert T.shape(T.concatenate([T.iota({1, 2, 3}), T.iota({1, 1, 3})], axis: 1)) == {1, 3, 3}

      s = T.stack([T.iota({2, 1, 4}), T.iota({2, 1, 4}), T.iota({2, 1, 4})], axis: -1)

      assert printed(s) ==
               expect("""
                 s32[2][1][4][3]
                 [
                   [
                     [
                       [0, 0, 0],
                       [1, 1, 1],
                       [2, 2, 2],
                       [3, 3, 3]
                     ]
                   ],
                   [
                     [
                       [4, 4, 4],
                       [5, 5, 5],
                       [6, 6, 6],
                       [7, 7, 7]
                     ]
                   ]
                 ]
               """)

      assert T.to_list(T.stack([T.tensor(1), T.tensor(2)])) == [1, 2]

      assert T.to_list(T.stack({T.tensor([1, 2]), {T.tensor([3, 4]), T.tensor([5, 6])}})) ==
               [[1, 2], [3, 4], [5, 6]]

      assert T.type(T.stack([T.tensor([1], type: :u8), T.tensor([-1], type: :s8)])) == {:s, 16}
    end

    test "split" do
      t = T.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
      {l, r} = T.split(t, 2, axis: 1)
      assert T.to_list(l) == [[0, 1], [4, 5], [8, 9]]
      assert T.to_list(r) == [[2, 3], [6, 7], [10, 11]]
      {l, r} = T.split(t, 0.5)
      assert {T.shape(l), T.shape(r)} == {{2, 4}, {1, 4}}
      {l, r} = T.split(t, 0.75, axis: 1)
      assert T.to_list(r) == [[3], [7], [11]]
      assert T.to_list(l) == [[0, 1, 2], [4, 5, 6], [8, 9, 10]]
      {l, r} = T.split(T.tensor([1, 2, 3, 4]), -1)
      assert {T.to_list(l), T.to_list(r)} == {[1, 2, 3], [4]}
    end

    test "slice, slice_along_axis, put_slice" do
      assert T.to_list(T.slice(T.tensor([1, 2, 3, 4, 5, 6]), [0], [3])) == [1, 2, 3]

      assert T.to_list(
               T.slice(T.tensor([[1, 2], [3, 4], [5, 6]]), [0, 0], [3, 2], strides: [2, 1])
             ) ==
               [[1, 2], [5, 6]]

      assert T.to_list(T.slice(T.tensor([[1, 2], [3, 4], [5, 6]]), [0, 0], [3, 2], strides: 2)) ==
               [[1], [5]]

      assert T.to_list(
               T.slice(T.tensor([[1, 2, 3], [4, 5, 6]]), [T.tensor(1), T.tensor(2)], [1, 1])
             ) ==
               [[6]]

      z = List.duplicate(0.0, 7)
      o = List.duplicate(1.0, 7)
      t = T.tensor([z, z, o, o, o, o])

      assert printed(T.slice(t, [T.tensor(0), T.tensor(0)], [6, 7], strides: [5, 3])) ==
               expect("""
                 f32[2][3]
                 [
                   [0.0, 0.0, 0.0],
                   [1.0, 1.0, 1.0]
                 ]
               """)

      assert T.to_list(T.slice(T.iota({3, 3}), [2, 2], [1, 1])) == [[8]]
      assert T.to_list(T.slice(T.iota({3, 3}), [2, 2], [2, 2])) == [[4, 5], [7, 8]]
      assert printed(T.slice(T.tensor(42), [], [])) == expect("  s32\n  42\n")

      assert T.to_list(T.slice_along_axis(T.iota({2, 5}), 1, 2, axis: 1)) == [[1, 2], [6, 7]]

      assert T.to_list(T.slice_along_axis(T.iota({2, 5}), T.tensor(0), 1, axis: 0)) == [
               [0, 1, 2, 3, 4]
             ]

      assert T.to_list(
               T.put_slice(T.tensor([[1, 2, 3], [4, 5, 6]]), [0, 1], T.tensor([[7, 8], [9, 10]]))
             ) ==
               [[1, 7, 8], [4, 9, 10]]
    end

    test "diagonals" do
      assert T.to_list(T.take_diagonal(T.iota({3, 3}), offset: 1)) == [1, 5]
      assert T.to_list(T.take_diagonal(T.iota({3, 2, 2}), offset: -1)) == [[2], [6], [10]]

      assert T.to_list(T.make_diagonal(T.tensor([1, 2, 3]), offset: 1)) ==
               [[0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 3], [0, 0, 0, 0]]

      assert printed(T.make_diagonal(T.tensor([1, 2, 3]), offset: -4)) ==
               expect("""
                 s32[7][7]
                 [
                   [0, 0, 0, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 0, 0],
                   [1, 0, 0, 0, 0, 0, 0],
                   [0, 2, 0, 0, 0, 0, 0],
                   [0, 0, 3, 0, 0, 0, 0]
                 ]
               """)

      assert T.to_list(T.make_diagonal(T.tensor([1, 2, 3]), offset: 4)) ==
               [
                 [0, 0, 0, 0, 1, 0, 0],
                 [0, 0, 0, 0, 0, 2, 0],
                 [0, 0, 0, 0, 0, 0, 3],
                 [0, 0, 0, 0, 0, 0, 0],
                 [0, 0, 0, 0, 0, 0, 0],
                 [0, 0, 0, 0, 0, 0, 0],
                 [0, 0, 0, 0, 0, 0, 0]
               ]

      z44 = T.broadcast(0, {4, 4})
      z43 = T.broadcast(0, {4, 3})

      assert T.to_list(T.put_diagonal(z44, T.tensor([1, 2, 3, 4]))) ==
               [[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0], [0, 0, 0, 4]]

      assert T.to_list(T.put_diagonal(z43, T.tensor([1, 2]), offset: 1)) ==
               [[0, 1, 0], [0, 0, 2], [0, 0, 0], [0, 0, 0]]

      assert T.to_list(T.put_diagonal(z44, T.tensor([1, 2, 3]), offset: -1)) ==
               [[0, 0, 0, 0], [1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0]]

      assert T.to_list(T.put_diagonal(z43, T.tensor([1, 2, 3]), offset: -1)) ==
               [[0, 0, 0], [1, 0, 0], [0, 2, 0], [0, 0, 3]]
    end

    test "dot" do
      assert printed(T.dot(5, 5)) == expect("  s32\n  25\n")
      assert printed(T.dot(-2.0, 5.0)) == expect("  f32\n  -10.0\n")
      assert printed(T.dot(2, 2.0)) == expect("  f32\n  4.0\n")

      assert printed(T.dot(T.tensor([2.0, 4.0, 3.0, 5.0]), T.tensor([1.0, 2.0, 3.0, 4.0]))) ==
               expect("  f32\n  39.0\n")

      assert printed(T.dot(T.tensor([1.0, 2.0, 3.0]), T.tensor([1, 2, 3]))) ==
               expect("  f32\n  14.0\n")

      left = T.tensor([[10.0, 13.0, 14.0, 15.0], [59.0, 20.0, 10.0, 30.0]])
      right = T.tensor([[2.0, 4.0], [5.0, 1.0], [6.0, 8.0], [9.0, 10.0]])
      assert T.to_list(T.dot(left, right)) == [[304.0, 315.0], [548.0, 636.0]]

      left = T.tensor([[1, 2, 3], [4, 5, 6]])
      right = T.tensor([[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]])

      assert printed(T.dot(left, right)) ==
               expect("  f32[2][2]\n  [\n    [58.0, 64.0],\n    [139.0, 154.0]\n  ]\n")

      left = T.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
      assert T.to_list(T.dot(left, T.tensor([5, 10]))) == [[25, 55], [85, 115]]

      left = T.tensor([[[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]]])
      r = T.dot(left, T.tensor([2.0, 2.0]))
      assert T.shape(r) == {1, 1, 2, 2}
      assert T.to_list(r) == [[[[6.0, 14.0], [22.0, 30.0]]]]

      left = T.tensor([[[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[1, 2, 3], [4, 5, 6], [7, 8, 9]]])
      right = T.tensor([[[1, 2, 3], [3, 4, 5], [5, 6, 7]]])
      r = T.dot(left, right)
      assert T.shape(r) == {2, 3, 1, 3}
      assert T.to_list(r) |> hd() == [[[22, 28, 34]], [[49, 64, 79]], [[76, 100, 124]]]

      t1 = T.tensor([[1, 2], [3, 4]])
      t2 = T.tensor([[10, 20], [30, 40]])
      assert T.to_list(T.dot(t1, [0], [], t2, [1], [])) == [[70, 150], [100, 220]]
      assert T.to_list(T.dot(t1, [1], [], t2, [0], [])) == [[70, 100], [150, 220]]
      assert T.to_list(T.dot(t1, [1], [], t2, [1], [])) == [[50, 110], [110, 250]]
      assert printed(T.dot(t1, [0, 1], [], t2, [0, 1], [])) == expect("  s32\n  300\n")

      outer = T.dot(t1, [], [], t2, [], [])
      assert T.shape(outer) == {2, 2, 2, 2}
      assert T.to_list(outer) |> hd() == [[[10, 20], [30, 40]], [[20, 40], [60, 80]]]

      u = T.tensor([[[1]], [[2]]])
      v = T.tensor([[[3]], [[4]]])
      assert T.to_list(T.dot(u, [2], [0], v, [2], [0])) == [[[3]], [[8]]]
    end

    test "outer" do
      assert T.to_list(T.outer(T.tensor([1, 2, 3]), T.tensor([10, 20]))) == [
               [10, 20],
               [20, 40],
               [30, 60]
             ]

      c = T.tensor([Emily.Complex.new(1, 2)])
      r = T.outer(c, c)
      assert T.type(r) == {:c, 64}
      # Nx conjugates the right operand: (1+2i)(1-2i) = 5
      assert printed(r) == expect("  c64[1][1]\n  [\n    [5.0+0.0i]\n  ]\n")
    end
  end

  describe "every dtype" do
    test "views and copies keep values and type" do
      for type <- @all_types do
        t = T.iota({2, 3}, type: type)
        flat = T.to_flat_list(t)
        assert T.type(T.reshape(t, {3, 2})) == type
        assert T.to_flat_list(T.reshape(t, {3, :auto})) == flat
        assert T.to_flat_list(T.transpose(T.transpose(t))) == flat
        assert T.to_flat_list(T.reverse(T.reverse(t))) == flat
        assert T.to_flat_list(T.squeeze(T.new_axis(t, 1))) == flat
        assert T.to_flat_list(T.flatten(t)) == flat

        assert T.to_flat_list(T.slice(t, [0, 1], [2, 2])) ==
                 Enum.map([1, 2, 4, 5], &Enum.at(flat, &1))

        assert T.to_flat_list(T.slice(t, [T.tensor(0), T.tensor(1)], [2, 2])) ==
                 Enum.map([1, 2, 4, 5], &Enum.at(flat, &1))

        assert T.type(T.pad(t, 0, [{1, 1, 1}, {0, 0, 0}])) == type
        assert T.to_flat_list(T.pad(t, 0, [{-1, 0, 0}, {0, 0, 0}])) == Enum.drop(flat, 3)
        assert T.to_flat_list(T.concatenate([t, t], axis: 1)) |> length() == 12
        assert T.to_flat_list(T.take_diagonal(t)) == [Enum.at(flat, 0), Enum.at(flat, 4)]

        assert T.to_flat_list(T.tile(t, [1, 2])) |> Enum.take(6) ==
                 Enum.take(flat, 3) ++ Enum.take(flat, 3)

        {a, b} = T.split(t, 1)
        assert T.to_flat_list(a) ++ T.to_flat_list(b) == flat
        d = T.make_diagonal(T.slice(T.flatten(t), [1], [2]))
        assert T.type(d) == type
        zero = Enum.at(flat, 0)
        assert T.to_flat_list(d) == [Enum.at(flat, 1), zero, zero, Enum.at(flat, 2)]
        p = T.put_slice(t, [1, 1], T.slice(t, [0, 0], [1, 2]))
        assert T.to_flat_list(p) == Enum.take(flat, 4) ++ Enum.slice(flat, 0, 2)
      end
    end

    test "dot of every dtype matches the integer result" do
      a = [[1, 2, 3], [4, 5, 6]]
      b = [[1, 0], [2, 1], [0, 3]]
      want = [[5, 11], [14, 23]]

      for type <- @all_types do
        r = T.dot(T.tensor(a, type: type), T.tensor(b, type: type))
        assert T.type(r) == type

        got =
          T.to_list(r)
          |> Enum.map(fn row -> Enum.map(row, &real_number/1) end)

        assert got == Enum.map(want, fn row -> Enum.map(row, &(&1 * 1.0)) end) or
                 got == want
      end
    end

    test "dot promotes with merge" do
      assert T.type(T.dot(T.tensor([1, 2], type: :u8), T.tensor([1, 2], type: :s8))) == {:s, 16}
      assert T.type(T.dot(T.tensor([1, 2], type: :s64), T.tensor([1, 2], type: :f16))) == {:f, 16}
      assert T.type(T.dot(T.tensor([1, 2], type: :f32), T.tensor([1, 2], type: :c64))) == {:c, 64}

      assert T.to_number(T.dot(T.tensor([200, 100], type: :u8), T.tensor([1, 1], type: :u8))) ==
               44

      assert T.type(T.pad(T.tensor([1], type: :u8), 1.5, [{1, 0, 0}])) == {:f, 32}
      assert T.to_list(T.pad(T.tensor([1], type: :u8), 1.5, [{1, 0, 0}])) == [1.5, 1.0]

      assert T.type(T.put_slice(T.tensor([1, 2], type: :u8), [0], T.tensor([1], type: :s8))) ==
               {:s, 16}

      assert T.type(T.put_diagonal(T.iota({2, 2}, type: :u8), T.tensor([1.0, 2.0]))) == {:f, 32}
    end
  end

  defp real_number(%Emily.Complex{re: re}), do: re
  defp real_number(x), do: x

  describe "strided inputs" do
    test "every op reads a transposed view correctly" do
      rows = [[1, 2, 3], [4, 5, 6]]
      s = strided(rows)
      assert T.to_list(s) == rows
      assert T.to_list(T.reshape(s, {3, 2})) == [[1, 2], [3, 4], [5, 6]]
      assert T.to_list(T.flatten(s)) == [1, 2, 3, 4, 5, 6]
      assert T.to_list(T.pad(s, 0, [{0, 0, 1}, {1, -1, 0}])) == [[0, 1, 2], [0, 0, 0], [0, 4, 5]]
      assert T.to_list(T.slice(s, [0, 1], [2, 2])) == [[2, 3], [5, 6]]
      assert T.to_list(T.slice(s, [T.tensor(1), T.tensor(-3)], [1, 2], strides: [1, 2])) == [[4]]

      assert T.to_list(T.put_slice(s, [T.tensor(5), T.tensor(0)], T.tensor([[7, 8]]))) == [
               [1, 2, 3],
               [7, 8, 6]
             ]

      assert T.to_list(T.put_slice(s, [0, 2], strided([[9], [10]]))) == [[1, 2, 9], [4, 5, 10]]
      assert T.to_list(T.concatenate([s, T.tensor([[7, 8, 9]])])) == rows ++ [[7, 8, 9]]
      assert T.to_list(T.stack([s, s], axis: 2)) |> hd() == [[1, 1], [2, 2], [3, 3]]
      assert T.to_list(T.take_diagonal(s)) == [1, 5]
      assert T.to_list(T.tile(s, [2, 1])) == rows ++ rows
      assert T.to_list(T.broadcast(T.slice(s, [0, 0], [1, 3]), {2, 3})) == [[1, 2, 3], [1, 2, 3]]
      assert T.to_list(T.dot(s, strided([[1, 0], [0, 1], [1, 1]]))) == [[4, 5], [10, 11]]
      assert T.to_list(T.dot(s, [0], s, [0])) == [[17, 22, 27], [22, 29, 36], [27, 36, 45]]
      assert T.to_list(T.put_diagonal(s, T.tensor([0, 0]))) == [[0, 2, 3], [4, 0, 6]]
      assert T.to_list(T.outer(s, T.tensor([1, -1]))) |> Enum.take(2) == [[1, -1], [2, -2]]
    end
  end

  describe "numpy oracle" do
    @describetag :numpy

    test "dot/6 against tensordot over random shapes and axes" do
      :rand.seed(:exsss, {7, 11, 13})

      cases =
        for i <- 0..39 do
          nbatch = Enum.random([0, 0, 1, 2])
          batch = for _ <- 1..nbatch//1, do: Enum.random(1..3)
          ncontract = Enum.random(0..2)
          contract = for _ <- 1..ncontract//1, do: Enum.random(1..4)
          free_a = for _ <- 1..Enum.random(0..2)//1, do: Enum.random(1..3)
          free_b = for _ <- 1..Enum.random(0..2)//1, do: Enum.random(1..3)
          # a: batch ++ shuffled(contract ++ free_a); b likewise.
          {a_rest, ca} = place(contract, free_a, nbatch)
          {b_rest, cb} = place(contract, free_b, nbatch)
          a_shape = List.to_tuple(batch ++ a_rest)
          b_shape = List.to_tuple(batch ++ b_rest)
          bax = Enum.to_list(0..(nbatch - 1)//1)
          type = Enum.at([{:f, 64}, {:f, 32}, {:s, 32}, {:c, 128}], rem(i, 4))
          {i, a_shape, ca, bax, b_shape, cb, type}
        end

      inputs =
        Enum.flat_map(cases, fn {i, sa, _, _, sb, _, _} ->
          [{:"a#{i}", random_values(sa)}, {:"b#{i}", random_values(sb)}]
        end)

      code =
        """
        def nxdot(a, ca, ba, b, cb):
            if ba == 0:
                return np.tensordot(a, b, axes=(ca, cb))
            return np.stack([nxdot(a[k], [c - 1 for c in ca], ba - 1, b[k], [c - 1 for c in cb]) for k in range(a.shape[0])])
        """ <>
          Enum.map_join(cases, "\n", fn {i, _, ca, bax, _, cb, _} ->
            "out['r#{i}'] = nxdot(a#{i}, #{inspect(ca)}, #{length(bax)}, b#{i}, #{inspect(cb)})"
          end)

      want = Numpy.run(code, inputs)

      for {i, sa, ca, bax, sb, cb, type} <- cases do
        {a_vals, _} = inputs[:"a#{i}"]
        {b_vals, _} = inputs[:"b#{i}"]
        a = a_vals |> T.tensor(type: {:f, 64}) |> T.reshape(sa) |> T.as_type(type)
        b = b_vals |> T.tensor(type: {:f, 64}) |> T.reshape(sb) |> T.as_type(type)
        r = T.dot(a, ca, bax, b, cb, bax)
        {shape, values} = want["r#{i}"]
        assert T.shape(r) == shape, "case #{i}"
        got = r |> T.as_type({:f, 64}) |> T.to_flat_list()
        tol = if type == {:f, 32}, do: 1.0e-3, else: 1.0e-9

        for {g, w} <- Enum.zip(got, values) do
          assert abs(g - w) <= tol * (1 + abs(w)), "case #{i}: #{g} vs #{w}"
        end
      end
    end

    test "pad against a numpy construction (negative and interior)" do
      :rand.seed(:exsss, {1, 2, 3})

      cases =
        for i <- 0..29 do
          shape = for _ <- 1..Enum.random(1..3), do: Enum.random(1..4)

          config =
            for d <- shape do
              int = Enum.random(0..2)
              inner = d + (d - 1) * int
              lo = Enum.random(-inner..3)
              hi = Enum.random(max(-(inner + lo), -3)..3)
              {lo, hi, int}
            end

          {i, List.to_tuple(shape), config}
        end

      inputs = Enum.map(cases, fn {i, shape, _} -> {:"x#{i}", random_values(shape)} end)

      code =
        """
        def ref_pad(x, value, config):
            canvas, place, crop = [], [], []
            for d, (lo, hi, it) in zip(x.shape, config):
                inner = d + max(d - 1, 0) * it
                a, b = max(lo, 0), max(hi, 0)
                canvas.append(a + inner + b)
                place.append(slice(a, a + inner, it + 1))
                crop.append(slice(a - lo, a + inner + hi))
            c = np.full(canvas, value)
            c[tuple(place)] = x
            return c[tuple(crop)]
        """ <>
          Enum.map_join(cases, "\n", fn {i, _, config} ->
            py = Enum.map_join(config, ", ", fn {a, b, c} -> "(#{a}, #{b}, #{c})" end)
            "out['r#{i}'] = ref_pad(x#{i}, -7.5, [#{py}])"
          end)

      want = Numpy.run(code, inputs)

      for {i, shape, config} <- cases do
        {vals, _} = inputs[:"x#{i}"]
        x = vals |> T.tensor(type: {:f, 64}) |> T.reshape(shape)
        {wshape, wvals} = want["r#{i}"]

        for input <- [x, x |> T.reverse() |> T.transpose() |> T.transpose() |> T.reverse()] do
          r = T.pad(input, -7.5, config)
          assert T.shape(r) == wshape, "case #{i} #{inspect(config)}"
          assert T.to_flat_list(r) == wvals, "case #{i} #{inspect(config)}"
        end
      end
    end
  end

  # contract dims and free dims shuffled together; returns the shape and
  # the (batch-offset) positions of the contract dims in order.
  defp place(contract, free, offset) do
    tagged = Enum.with_index(contract, fn d, k -> {:c, k, d} end) ++ Enum.map(free, &{:f, 0, &1})
    shuffled = Enum.shuffle(tagged)
    shape = Enum.map(shuffled, &elem(&1, 2))

    positions =
      for k <- 0..(length(contract) - 1)//1 do
        Enum.find_index(shuffled, &match?({:c, ^k, _}, &1)) + offset
      end

    {shape, positions}
  end

  defp random_values(shape) do
    n = shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))
    {for(_ <- 1..n, do: Enum.random(-9..9) * 1.0), shape}
  end

  describe "errors" do
    test "unknown options raise" do
      t = T.iota({2, 2})

      for f <- [
            fn -> T.reshape(t, {4}, foo: 1) end,
            fn -> T.squeeze(t, foo: 1) end,
            fn -> T.flatten(t, foo: 1) end,
            fn -> T.broadcast(t, {2, 2}, foo: 1) end,
            fn -> T.transpose(t, foo: 1) end,
            fn -> T.reverse(t, foo: 1) end,
            fn -> T.concatenate([t], foo: 1) end,
            fn -> T.stack([t], foo: 1) end,
            fn -> T.split(t, 1, foo: 1) end,
            fn -> T.slice(t, [0, 0], [1, 1], foo: 1) end,
            fn -> T.slice_along_axis(t, 0, 1, foo: 1) end,
            fn -> T.take_diagonal(t, foo: 1) end,
            fn -> T.make_diagonal(T.iota({2}), foo: 1) end,
            fn -> T.put_diagonal(t, T.iota({2}), foo: 1) end
          ] do
        assert_raise ArgumentError, ~r/unknown keys \[:foo\]/, f
      end
    end

    test "shapes and axes" do
      t = T.iota({2, 3})

      assert_raise ArgumentError,
                   "cannot reshape, current shape {2, 3} is not compatible with new shape {4}",
                   fn ->
                     T.reshape(t, {4})
                   end

      assert_raise ArgumentError,
                   ~r/cannot reshape, current shape \{1, 3\}.*new shape \{4\}/,
                   fn ->
                     T.reshape(T.iota({1, 3}), {:auto, 4})
                   end

      assert_raise ArgumentError, ~r/invalid dimension in axis 0/, fn -> T.reshape(t, {0, 6}) end
      assert_raise ArgumentError, ~r/expected a shape/, fn -> T.reshape(t, [6]) end
      assert_raise ArgumentError, ~r/named axes/, fn -> T.reshape(t, {6}, names: [:x]) end

      assert_raise ArgumentError, "given axis (2) invalid for shape with rank 2", fn ->
        T.transpose(t, axes: [1, 2])
      end

      assert_raise ArgumentError, "axes [0, 0] must be unique integers between 0 and 4", fn ->
        T.squeeze(T.tensor([[[[[1]]]]]), axes: [0, 0])
      end

      assert_raise ArgumentError, "given axis (3) invalid for shape with rank 3", fn ->
        T.new_axis(t, 3)
      end

      assert_raise ArgumentError, "broadcast axes must be ordered, got 0 after 1", fn ->
        T.broadcast(T.iota({2, 2}), {2, 2, 2}, axes: [1, 0])
      end

      assert_raise ArgumentError, "cannot broadcast tensor of dimensions {2, 3} to {3}", fn ->
        T.broadcast(t, {3})
      end

      assert_raise ArgumentError, "expected length of axes (1) to match rank of shape (2)", fn ->
        T.broadcast(t, {2, 3}, axes: [0])
      end

      assert_raise ArgumentError,
                   ~r/repetitions must be a list of integers, got: \[1, 1.0\]/,
                   fn ->
                     T.tile(t, [1, 1.0])
                   end

      assert_raise ArgumentError, ~r/repetitions must be a list of integers, got: nil/, fn ->
        T.tile(t, nil)
      end
    end

    test "pad" do
      t = T.iota({3})

      assert_raise ArgumentError, ~r/rank of padding configuration and shape must match/, fn ->
        T.pad(t, 0, [{0, 0, 0}, {0, 0, 0}])
      end

      assert_raise ArgumentError, ~r/interior padding must be greater than or equal to 0/, fn ->
        T.pad(t, 0, [{0, 0, -1}])
      end

      assert_raise ArgumentError, ~r/padded size would be negative/, fn ->
        T.pad(t, 0, [{-2, -2, 0}])
      end

      assert_raise ArgumentError, ~r/padding value must be a scalar/, fn ->
        T.pad(t, T.iota({1}), [{0, 0, 0}])
      end

      assert_raise ArgumentError, ~r/padding configuration must be/, fn ->
        T.pad(t, 0, [{0, 0}])
      end
    end

    test "join, split, slice" do
      assert_raise ArgumentError, "no tensors were given to concatenate", fn ->
        T.concatenate([])
      end

      assert_raise ArgumentError, "no tensors were given to stack", fn -> T.stack({}) end

      assert_raise ArgumentError,
                   "expected all shapes to match {*, 2, 3}, got unmatching shape: {1, 1}",
                   fn ->
                     T.concatenate([T.iota({1, 2, 3}), T.iota({1, 1})])
                   end

      assert_raise ArgumentError, ~r/expected all shapes to match \{2\}/, fn ->
        T.stack([T.iota({2}), T.iota({3})])
      end

      assert_raise ArgumentError, ~r/split must be an integer greater than zero/, fn ->
        T.split(T.iota({4}), 4)
      end

      assert_raise ArgumentError, ~r/split must be a float/, fn -> T.split(T.iota({4}), 1.0) end
      assert_raise ArgumentError, ~r/invalid split received/, fn -> T.split(T.iota({4}), :a) end

      t = T.tensor([[1, 2, 3], [4, 5, 6]])

      assert_raise ArgumentError, "index must be scalar, got shape {2} for axis 0", fn ->
        T.slice(t, [T.tensor([1, 2]), T.tensor(1)], [1, 1])
      end

      assert_raise ArgumentError, "index must be integer type, got {:f, 32} for axis 0", fn ->
        T.slice(t, [T.tensor(1.0), T.tensor(0)], [1, 1])
      end

      assert_raise ArgumentError,
                   "length at axis 0 must be less than axis size of 2, got: 3",
                   fn ->
                     T.slice(t, [0, 0], [3, 1])
                   end

      assert_raise ArgumentError, ~r/length at axis 1 must be greater than or equal to 1/, fn ->
        T.slice(t, [0, 0], [1, 0])
      end

      assert_raise ArgumentError, ~r/stride at axis 0/, fn ->
        T.slice(t, [0, 0], [1, 1], strides: [0, 1])
      end

      assert_raise ArgumentError, ~r/invalid start indices rank/, fn ->
        T.slice(t, [0], [1, 1])
      end

      assert_raise ArgumentError, ~r/invalid limit indices rank/, fn ->
        T.slice(t, [0, 0], [1])
      end

      assert_raise ArgumentError, ~r/invalid strides rank/, fn ->
        T.slice(t, [0, 0], [1, 1], strides: [1])
      end

      assert_raise ArgumentError,
                   ~r/slice shape \{3, 1\} must be less than or equal to tensor shape \{2, 3\}/,
                   fn ->
                     T.put_slice(t, [0, 0], T.iota({3, 1}))
                   end

      assert_raise ArgumentError, ~r/rank of slice must match 2, got: 1/, fn ->
        T.put_slice(t, [0, 0], T.iota({1}))
      end

      assert_raise ArgumentError, ~r/invalid start indices rank/, fn ->
        T.put_slice(t, [0], T.iota({1, 1}))
      end
    end

    test "clamped starts" do
      t = T.iota({5})
      assert T.to_list(T.slice(t, [4], [2])) == [3, 4]
      assert T.to_list(T.slice(t, [-3], [2])) == [0, 1]
      assert T.to_list(T.slice(t, [T.tensor(-3)], [2])) == [0, 1]
      assert T.to_list(T.slice(t, [T.tensor(100, type: :u8)], [2])) == [3, 4]
      assert T.to_list(T.put_slice(t, [9], T.tensor([7, 7]))) == [0, 1, 2, 7, 7]
      assert T.to_list(T.put_slice(t, [T.tensor(-9)], T.tensor([7, 7]))) == [7, 7, 2, 3, 4]
    end

    test "diagonals and dot" do
      assert_raise ArgumentError,
                   "offset must be less than length of axis 1 when positive, got: 3",
                   fn ->
                     T.take_diagonal(T.iota({3, 3}), offset: 3)
                   end

      assert_raise ArgumentError,
                   ~r/absolute value of offset must be less than length of axis 0 when negative, got: -4/,
                   fn ->
                     T.take_diagonal(T.iota({3, 3}), offset: -4)
                   end

      assert_raise ArgumentError,
                   "put_diagonal/3 expects tensor of rank 2, got tensor of rank: 3",
                   fn ->
                     T.put_diagonal(T.iota({3, 3, 3}), T.iota({3}))
                   end

      assert_raise ArgumentError,
                   "put_diagonal/3 expects diagonal of rank 1, got tensor of rank: 2",
                   fn ->
                     T.put_diagonal(T.iota({3, 3}), T.iota({3, 3}))
                   end

      assert_raise ArgumentError,
                   ~r/expected diagonal tensor of length: 2, got diagonal tensor of length: 3/,
                   fn ->
                     T.put_diagonal(T.iota({3, 3}), T.iota({3}), offset: 1)
                   end

      assert_raise ArgumentError,
                   ~r/offset must be less than length of axis 1 when positive, got: 4/,
                   fn ->
                     T.put_diagonal(T.iota({3, 3}), T.iota({3}), offset: 4)
                   end

      u = T.tensor([[[1, 1]], [[2, 2]]])
      v = T.tensor([[[3], [3]], [[4], [4]]])

      assert_raise ArgumentError, "right tensor must be batched if left tensor is batched", fn ->
        T.dot(u, [2], [0], v, [1], [])
      end

      assert_raise ArgumentError, "left tensor must be batched if right tensor is batched", fn ->
        T.dot(u, [2], [], v, [1], [0])
      end

      assert_raise ArgumentError, ~r/invalid dot batch axis for the right tensor/, fn ->
        T.dot(u, [2], [0], v, [1], [1])
      end

      assert_raise ArgumentError,
                   "dot batch axes for left tensor ([0]) cannot be in contract axes ([0])",
                   fn ->
                     T.dot(u, [0], [0], v, [1], [0])
                   end

      assert_raise ArgumentError,
                   "dot batch axes for right tensor ([0]) cannot be in contract axes ([0])",
                   fn ->
                     T.dot(u, [2], [0], v, [0], [0])
                   end

      assert_raise ArgumentError, ~r/dot batch dimension sizes must match/, fn ->
        T.dot(T.iota({2, 3}), [1], [0], T.iota({3, 3}), [1], [0])
      end

      assert_raise ArgumentError, ~r/same number of contract axes/, fn ->
        T.dot(u, [1, 2], v, [1])
      end

      assert_raise ArgumentError, ~r/dot\/zip expects shapes to be compatible/, fn ->
        T.dot(T.iota({2, 3}), T.iota({2, 3}))
      end
    end
  end
end
