defmodule Emily.Tensor.ReductionTest do
  use ExUnit.Case, async: true

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.Core

  doctest Emily.Tensor.Reduction

  defp t(list, opts \\ []), do: T.tensor(list, opts)
  defp show(tensor), do: inspect(tensor)

  # to_list for tensors, to_number for scalars (Nx's to_list refuses scalars).
  defp val(%Emily.Tensor{shape: {}} = x), do: T.to_number(x)
  defp val(x), do: T.to_list(x)

  defp nx(text), do: String.replace(String.trim(text), "#Nx.Tensor<", "#Emily.Tensor<")

  defp assert_prints(tensor, text), do: assert(show(tensor) == nx(text))

  # ---------------------------------------------------------------------------
  # Nx's documented examples
  # ---------------------------------------------------------------------------

  describe "Nx examples" do
    test "sum" do
      assert_prints(T.sum(t(42)), "#Nx.Tensor<\n  s32\n  42\n>")
      assert_prints(T.sum(t([[1.0, 2.0], [3.0, 4.0]])), "#Nx.Tensor<\n  f32\n  10.0\n>")

      assert_prints(
        T.sum(t([[101, 102], [103, 104]], type: :s16)),
        "#Nx.Tensor<\n  s32\n  410\n>"
      )

      assert_prints(T.sum(t([1, 2, 3]), axes: [0]), "#Nx.Tensor<\n  s32\n  6\n>")
      i = T.iota({2, 2, 3})

      assert_prints(T.sum(i, axes: [0]), """
      #Nx.Tensor<
        s32[2][3]
        [
          [6, 8, 10],
          [12, 14, 16]
        ]
      >
      """)

      assert_prints(T.sum(i, axes: [1]), """
      #Nx.Tensor<
        s32[2][3]
        [
          [3, 5, 7],
          [15, 17, 19]
        ]
      >
      """)

      assert_prints(T.sum(i, axes: [2]), """
      #Nx.Tensor<
        s32[2][2]
        [
          [3, 12],
          [21, 30]
        ]
      >
      """)

      assert T.sum(i, axes: [-3]) |> val() == [[6, 8, 10], [12, 14, 16]]

      assert_raise ArgumentError, "given axis (2) invalid for shape with rank 2", fn ->
        T.sum(t([[1, 2]]), axes: [2])
      end
    end

    test "product" do
      assert_prints(T.product(t(42)), "#Nx.Tensor<\n  s32\n  42\n>")
      assert_prints(T.product(t([1, 2, 3])), "#Nx.Tensor<\n  s32\n  6\n>")

      assert_prints(
        T.product(t([[10, 20], [30, 40]], type: :s8)),
        "#Nx.Tensor<\n  s32\n  240000\n>"
      )

      i = T.iota({2, 2, 3})
      assert val(T.product(i, axes: [0])) == [[0, 7, 16], [27, 40, 55]]
      assert val(T.product(i, axes: [1])) == [[0, 4, 10], [54, 70, 88]]
      assert val(T.product(i, axes: [0, 2])) == [0, 59400]

      assert_prints(T.product(i, axes: [2], keep_axes: true), """
      #Nx.Tensor<
        s32[2][2][1]
        [
          [
            [0],
            [60]
          ],
          [
            [336],
            [990]
          ]
        ]
      >
      """)
    end

    test "reduce_max and reduce_min" do
      assert_prints(T.reduce_max(t(42)), "#Nx.Tensor<\n  s32\n  42\n>")
      assert_prints(T.reduce_max(t(42.0)), "#Nx.Tensor<\n  f32\n  42.0\n>")
      assert_prints(T.reduce_max(t([1, 2, 3])), "#Nx.Tensor<\n  s32\n  3\n>")
      m = t([[3, 1, 4], [2, 1, 1]])
      assert_prints(T.reduce_max(m, axes: [0]), "#Nx.Tensor<\n  s32[3]\n  [3, 1, 4]\n>")
      assert_prints(T.reduce_min(m, axes: [1]), "#Nx.Tensor<\n  s32[2]\n  [1, 1]\n>")
      c = t([[[1, 2], [4, 5]], [[2, 4], [3, 8]]])
      assert_prints(T.reduce_max(c, axes: [0, 2]), "#Nx.Tensor<\n  s32[2]\n  [4, 8]\n>")
      assert_prints(T.reduce_min(c, axes: [0, 2]), "#Nx.Tensor<\n  s32[2]\n  [1, 3]\n>")
      assert T.reduce_min(c, axes: [0, 2], keep_axes: true) |> val() == [[[1], [3]]]
    end

    test "all and any" do
      m = t([[-1, 0, 1], [2, 3, 4]])
      assert_prints(T.all(m, axes: [1]), "#Nx.Tensor<\n  u8[2]\n  [0, 1]\n>")
      n = t([[0, 1, 0], [0, 1, 2]])
      assert_prints(T.any(n, axes: [1]), "#Nx.Tensor<\n  u8[2]\n  [1, 1]\n>")

      assert_prints(T.any(n, axes: [1], keep_axes: true), """
      #Nx.Tensor<
        u8[2][1]
        [
          [1],
          [1]
        ]
      >
      """)
    end

    test "mean" do
      assert_prints(T.mean(t(42)), "#Nx.Tensor<\n  f32\n  42.0\n>")
      assert_prints(T.mean(t([1, 2, 3]), axes: [0]), "#Nx.Tensor<\n  f32\n  2.0\n>")
      assert_prints(T.mean(t([1, 2, 3], type: :u8), axes: [0]), "#Nx.Tensor<\n  f32\n  2.0\n>")
      i = T.iota({2, 2, 3})
      assert val(T.mean(i, axes: [0])) == [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
      assert val(T.mean(i, axes: [-1])) == [[1.0, 4.0], [7.0, 10.0]]
    end

    test "weighted_mean" do
      assert_prints(T.weighted_mean(t(42), t(2)), "#Nx.Tensor<\n  f32\n  42.0\n>")

      assert_prints(
        T.weighted_mean(t([1, 2, 3]), t([4, 5, 6]), axes: [0]),
        "#Nx.Tensor<\n  f32\n  2.1333334\n>"
      )

      assert_prints(
        T.weighted_mean(t([1, 2, 3], type: :u8), t([1, 3, 5]), axes: [0]),
        "#Nx.Tensor<\n  f32\n  2.4444444\n>"
      )

      i = T.iota({2, 2, 3})
      w = t([[[0, 1, 2], [1, 1, 0]], [[-1, 1, -1], [1, 1, -1]]])

      assert_prints(T.weighted_mean(i, w, axes: [-1], keep_axes: true), """
      #Nx.Tensor<
        f32[2][2][1]
        [
          [
            [1.6666666],
            [3.5]
          ],
          [
            [7.0],
            [8.0]
          ]
        ]
      >
      """)

      assert_raise ArgumentError, ~r/axes must be specified/, fn ->
        T.weighted_mean(T.iota({3, 4}), t([1, 2, 3, 4]))
      end

      assert_raise ArgumentError, ~r/rank equal to the number of aggregation axes/, fn ->
        T.weighted_mean(T.iota({3, 4}), t([[1, 2, 3, 4]]), axes: [1])
      end
    end

    test "median" do
      assert_prints(T.median(t(42)), "#Nx.Tensor<\n  s32\n  42\n>")
      assert_prints(T.median(t([1, 2, 3])), "#Nx.Tensor<\n  s32\n  2\n>")
      assert_prints(T.median(t([1, 2])), "#Nx.Tensor<\n  f32\n  1.5\n>")
      assert_prints(T.median(T.iota({2, 3, 3})), "#Nx.Tensor<\n  f32\n  8.5\n>")
      m = t([[1, 2, 3], [4, 5, 6]])
      assert_prints(T.median(m, axis: 0), "#Nx.Tensor<\n  f32[3]\n  [2.5, 3.5, 4.5]\n>")
      assert_prints(T.median(m, axis: 1), "#Nx.Tensor<\n  s32[2]\n  [2, 5]\n>")
      assert val(T.median(T.iota({2, 2, 3}), axis: 0)) == [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
      c = t([[[1, 2, 2], [3, 4, 2]], [[4, 5, 2], [7, 9, 2]]])

      assert_prints(
        T.median(c, axis: -1),
        "#Nx.Tensor<\n  s32[2][2]\n  [\n    [2, 3],\n    [4, 7]\n  ]\n>"
      )
    end

    test "mode" do
      assert_prints(T.mode(t(42)), "#Nx.Tensor<\n  s32\n  42\n>")
      assert_prints(T.mode(t([[1]])), "#Nx.Tensor<\n  s32\n  1\n>")
      assert_prints(T.mode(t([1, 2, 2, 3, 5])), "#Nx.Tensor<\n  s32\n  2\n>")
      m = t([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]])
      assert_prints(T.mode(m), "#Nx.Tensor<\n  s32\n  1\n>")
      assert_prints(T.mode(m, axis: 1), "#Nx.Tensor<\n  s32[2]\n  [2, 1]\n>")
      assert_prints(T.mode(t([[[1]]]), axis: 1), "#Nx.Tensor<\n  s32[1][1]\n  [\n    [1]\n  ]\n>")
      # keep_axis without an axis keeps every axis; a scalar gains one.
      assert T.shape(T.mode(m, keep_axis: true)) == {1, 1}
      assert T.shape(T.mode(t(3), keep_axis: true)) == {1}
    end

    test "argmax and argmin" do
      assert_prints(T.argmax(4), "#Nx.Tensor<\n  s32\n  0\n>")
      assert_prints(T.argmin(4), "#Nx.Tensor<\n  s32\n  0\n>")
      c = t([[[4, 2, 3], [1, -5, 3]], [[6, 2, 3], [4, 8, 3]]])
      assert_prints(T.argmax(t([2.0, 4.0])), "#Nx.Tensor<\n  s32\n  1\n>")
      assert_prints(T.argmin(t([2.0, 4.0])), "#Nx.Tensor<\n  s32\n  0\n>")
      assert_prints(T.argmin(t([2.0, :nan, 4.0])), "#Nx.Tensor<\n  s32\n  1\n>")
      assert val(T.argmax(c, axis: 1)) == [[0, 0, 0], [0, 1, 0]]
      assert val(T.argmax(c, axis: 2)) == [[0, 2], [0, 1]]
      assert val(T.argmax(c, axis: 1, tie_break: :low)) == [[0, 0, 0], [0, 1, 0]]
      assert val(T.argmin(c, axis: 0)) == [[0, 0, 0], [0, 0, 0]]
      assert val(T.argmin(c, axis: 1)) == [[1, 1, 0], [1, 0, 0]]
      assert val(T.argmin(c, axis: 2)) == [[1, 1], [1, 2]]

      assert_prints(T.argmin(c, tie_break: :high, axis: 1, type: :u32), """
      #Nx.Tensor<
        u32[2][3]
        [
          [1, 1, 1],
          [1, 0, 1]
        ]
      >
      """)

      assert_prints(T.argmax(c, axis: 1, keep_axis: true), """
      #Nx.Tensor<
        s32[2][1][3]
        [
          [
            [0, 0, 0]
          ],
          [
            [0, 1, 0]
          ]
        ]
      >
      """)

      # Without an axis, keep_axis is ignored (the flat index is a scalar).
      assert T.shape(T.argmax(c, keep_axis: true)) == {}
    end

    test "all_close" do
      zero = "#Nx.Tensor<\n  u8\n  0\n>"
      one = "#Nx.Tensor<\n  u8\n  1\n>"
      assert_prints(T.all_close(t(:nan), t(:nan)), zero)
      assert_prints(T.all_close(t(:nan), t(0)), zero)
      nan1 = t([:nan, 1])
      assert_prints(T.all_close(nan1, nan1, equal_nan: false), zero)
      assert_prints(T.all_close(t(:infinity), t(:infinity)), one)
      assert_prints(T.all_close(t(:infinity), t(:neg_infinity)), zero)
      assert_prints(T.all_close(t(1.0e30), t(:infinity)), zero)
      # s8 -128 in b: abs(b) is computed in f64.
      x = t([[5, 6], [7, 8]], type: :s8)
      assert_prints(T.all_close(x, t(-128, type: :s8)), zero)
      m = t([-128, 127, 0], type: :s8)
      assert_prints(T.all_close(m, m), one)
      assert_prints(T.all_close(t([1.0, 2.0]), t([1.0, 2.0 + 1.0e-6])), one)
      assert_prints(T.all_close(t([1.0, 2.0]), 2.0, atol: 1.5), one)
      assert_prints(T.all_close(t([1.0, 2.0]), 2.0, rtol: 0.1), zero)
    end

    test "sort and argsort" do
      m = t([[3, 1, 7], [2, 5, 4]])

      assert_prints(
        T.sort(m, axis: 0),
        "#Nx.Tensor<\n  s32[2][3]\n  [\n    [2, 1, 4],\n    [3, 5, 7]\n  ]\n>"
      )

      assert_prints(
        T.sort(m, axis: 1),
        "#Nx.Tensor<\n  s32[2][3]\n  [\n    [1, 3, 7],\n    [2, 4, 5]\n  ]\n>"
      )

      assert val(T.sort(m, axis: 1, direction: :asc)) == [[1, 3, 7], [2, 4, 5]]
      assert val(T.argsort(m, axis: 0)) == [[1, 0, 1], [0, 1, 0]]
      assert val(T.argsort(m, axis: 1)) == [[1, 0, 2], [0, 2, 1]]
      assert val(T.argsort(m, axis: 1, direction: :desc)) == [[2, 0, 1], [1, 2, 0]]

      c =
        t([
          [[4, 5], [2, 5], [5, 0]],
          [[1, 9], [2, 1], [2, 1]],
          [[0, -1], [-1, 0], [0, -1]],
          [[-1, 0], [0, -1], [-1, 0]]
        ])

      assert val(T.sort(c, axis: 0)) == [
               [[-1, -1], [-1, -1], [-1, -1]],
               [[0, 0], [0, 0], [0, 0]],
               [[1, 5], [2, 1], [2, 0]],
               [[4, 9], [2, 5], [5, 1]]
             ]

      assert val(T.sort(c, axis: 1, direction: :desc)) == [
               [[5, 5], [4, 5], [2, 0]],
               [[2, 9], [2, 1], [1, 1]],
               [[0, 0], [0, -1], [-1, -1]],
               [[0, 0], [-1, 0], [-1, -1]]
             ]

      # Stable: equal elements keep their order in both directions.
      assert val(T.argsort(c, axis: 1, stable: true)) == [
               [[1, 2], [0, 0], [2, 1]],
               [[0, 1], [1, 2], [2, 0]],
               [[1, 0], [0, 2], [2, 1]],
               [[0, 1], [2, 0], [1, 2]]
             ]

      f = t([:nan, 1.0, :neg_infinity, :infinity, 0.0, :nan])
      assert val(T.sort(f, direction: :desc)) == [:nan, :nan, :infinity, 1.0, 0.0, :neg_infinity]
      assert val(T.argsort(f)) == [2, 4, 1, 3, 0, 5]
      assert val(T.argsort(f, direction: :desc)) == [0, 5, 3, 1, 4, 2]
    end
  end

  # ---------------------------------------------------------------------------
  # Types, options and errors
  # ---------------------------------------------------------------------------

  describe "types" do
    test "sum and product use the aggregate type" do
      for {type, out} <- [
            {:u8, {:u, 32}},
            {:u16, {:u, 32}},
            {:u32, {:u, 32}},
            {:u64, {:s, 64}},
            {:s8, {:s, 32}},
            {:s16, {:s, 32}},
            {:s32, {:s, 32}},
            {:s64, {:s, 64}},
            {:f16, {:f, 16}},
            {:bf16, {:bf, 16}},
            {:f32, {:f, 32}},
            {:f64, {:f, 64}},
            {:c64, {:c, 64}}
          ] do
        x = t([1, 2, 3], type: type)
        assert T.type(T.sum(x)) == out
        assert T.type(T.product(x)) == out
        assert val(T.sum(x)) in [6, 6.0, %Emily.Complex{re: 6.0, im: 0.0}]
      end

      # u8 sums past 255 without wrapping.
      assert val(T.sum(t([200, 200, 200], type: :u8))) == 600
      # s32 wraps.
      assert val(T.sum(t([2_147_483_647, 1]))) == -2_147_483_648
    end

    test "max/min/median/mode/sort keep the type; mean and friends are float" do
      for type <- [:u8, :s16, :s64, :f16, :bf16, :f64] do
        x = t([[3, 1, 2], [2, 2, 9]], type: type)
        tt = T.type(x)
        assert T.type(T.reduce_max(x)) == tt
        assert T.type(T.reduce_min(x, axes: [0])) == tt
        assert T.type(T.median(x, axis: 1)) == tt
        assert T.type(T.mode(x, axis: 1)) == tt
        assert T.type(T.sort(x, axis: 1)) == tt
        float = if tt in [{:f, 16}, {:bf, 16}, {:f, 64}], do: tt, else: {:f, 32}
        assert T.type(T.mean(x)) == float
        assert T.type(T.variance(x)) == float
        assert T.type(T.standard_deviation(x)) == float
        assert T.type(T.logsumexp(x)) == float
        assert T.type(T.all(x)) == {:u, 8}
        assert T.type(T.any(x)) == {:u, 8}
        assert T.type(T.argsort(x, type: :s64)) == {:s, 64}
        assert T.type(T.argmax(x, type: :u8)) == {:u, 8}
      end
    end

    test "axes: [] only converts the type" do
      x = t([0.5, 2.0])
      assert val(T.sum(x, axes: [])) == [0.5, 2.0]
      assert val(T.all(x, axes: [])) == [0, 2]
      assert T.type(T.sum(t([1, 2], type: :u8), axes: [])) == {:u, 32}
      assert val(T.mean(t([1, 2]), axes: [])) == [1.0, 2.0]
    end

    test "complex inputs" do
      z = t([Emily.Complex.new(1.0, 2.0), Emily.Complex.new(3.0, -1.0)])
      assert val(T.sum(z)) == Emily.Complex.new(4.0, 1.0)
      assert val(T.mean(z)) == Emily.Complex.new(2.0, 0.5)
      # variance of complex numbers is real: mean |z - mean|^2 = 3.25
      assert T.type(T.variance(z)) == {:f, 32}
      assert_in_delta T.to_number(T.variance(z)), 3.25, 1.0e-6

      for fun <- [
            &T.reduce_max/1,
            &T.reduce_min/1,
            &T.argmax/1,
            &T.argmin/1,
            &T.sort/1,
            &T.argsort/1,
            &T.median/1,
            &T.mode/1,
            &T.logsumexp/1
          ] do
        assert_raise ArgumentError, ~r/does not support complex inputs/, fn -> fun.(z) end
      end
    end

    test "options are validated" do
      x = t([1, 2])
      assert_raise ArgumentError, ~r/unknown keys \[:axis\]/, fn -> T.sum(x, axis: 0) end
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.argmax(x, axes: [0]) end
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.sort(x, foo: 1) end

      assert_raise ArgumentError, ~r/unknown value for :tie_break/, fn ->
        T.argmax(x, tie_break: :mid)
      end

      assert_raise ArgumentError, ~r/unknown value for :direction/, fn ->
        T.sort(x, direction: :up)
      end

      assert_raise ArgumentError, ~r/integer :type/, fn -> T.argsort(x, type: :f32) end
      assert_raise ArgumentError, ~r/must be unique/, fn -> T.sum(x, axes: [0, -1]) end
      assert_raise ArgumentError, ~r/invalid for shape with rank 0/, fn -> T.sort(t(1)) end
      assert_raise ArgumentError, ~r/ddof/, fn -> T.variance(x, ddof: -1) end
    end
  end

  # ---------------------------------------------------------------------------
  # Edge values
  # ---------------------------------------------------------------------------

  describe "edge values" do
    test "NaN propagates through sums, means and max/min" do
      x = t([[1.0, :nan], [3.0, 4.0]])
      assert val(T.sum(x, axes: [1])) == [:nan, 7.0]
      assert val(T.reduce_max(x, axes: [1])) == [:nan, 4.0]
      assert val(T.reduce_min(x, axes: [0])) == [1.0, :nan]
      assert val(T.mean(x, axes: [1])) == [:nan, 3.5]
      assert val(T.variance(x, axes: [1])) == [:nan, 0.25]
      assert val(T.logsumexp(x, axes: [1])) |> hd() == :nan
      assert val(T.argmax(x, axis: 1)) == [1, 1]
      assert val(T.argmin(x, axis: 0)) == [0, 0]
      # NaN sorts last, so the median ignores it when it is not in the middle.
      assert val(T.median(t([:nan, 1.0, 2.0]))) == 2.0
      assert val(T.median(t([:nan, 1.0, 2.0, 3.0]))) == 2.5
    end

    test "logsumexp with infinities" do
      assert val(T.logsumexp(t([:neg_infinity, :neg_infinity]))) == :neg_infinity
      assert val(T.logsumexp(t([1.0, :infinity]))) == :infinity
      assert_in_delta T.to_number(T.logsumexp(t([1000.0, 1000.0]))), 1000.6931, 1.0e-3
      assert_in_delta T.to_number(T.logsumexp(t([-1000.0, :neg_infinity]))), -1000.0, 1.0e-3

      assert_in_delta T.to_number(T.logsumexp(t([1, 2, 3, 4, 5, 6]), exp_scaling_factor: 0.5)),
                      :math.log(0.5) + 6.45619344,
                      1.0e-5

      k = T.logsumexp(t([[0.0, 0.0], [1.0, 1.0]]), axes: [1], keep_axes: true)
      assert T.shape(k) == {2, 1}
    end

    test "ties" do
      assert val(T.argmax(t([1, 3, 3, 2]))) == 1
      assert val(T.argmax(t([1, 3, 3, 2]), tie_break: :high)) == 2
      assert val(T.argmin(t([[0, 0], [0, 0]]), tie_break: :high)) == 3
      # mode ties go to the smallest value; NaNs never tie with each other.
      assert val(T.mode(t([5, 5, 1, 1, 3]))) == 1
      assert val(T.mode(t([[2, 9, 9, 2], [7, 7, 3, 3]]), axis: 1)) == [2, 3]
      assert val(T.mode(t([:nan, :nan, 2.0, 1.0]))) == 1.0
      assert val(T.mode(t([-0.0, 0.0, 1.0]))) == -0.0
    end

    test "min/max on extreme integers and unsigned types" do
      assert val(T.reduce_min(t([0, 255, 7], type: :u8))) == 0
      assert val(T.reduce_max(t([-9_223_372_036_854_775_808, 5], type: :s64))) == 5
      assert val(T.argmax(t([0, 18_446_744_073_709_551_615], type: :u64))) == 1
      assert val(T.sort(t([3, 0, 255, 128], type: :u8))) == [0, 3, 128, 255]
    end

    test "zero-size axes reduce to the identity" do
      e = Core.wrap(Native.from_binary(<<>>, [2, 0], {:f, 32}))
      assert val(T.sum(e, axes: [1])) == [0.0, 0.0]
      assert val(T.product(e, axes: [1])) == [1.0, 1.0]
      assert val(T.reduce_max(e, axes: [1])) == [:neg_infinity, :neg_infinity]
      assert val(T.all(e, axes: [1])) == [1, 1]
      assert val(T.any(e, axes: [1])) == [0, 0]
      assert T.shape(T.sort(e, axis: 1)) == {2, 0}
    end
  end

  # ---------------------------------------------------------------------------
  # Sorting: stability, NaN order, argsort vs numpy's stable argsort
  # ---------------------------------------------------------------------------

  defp strided(tensor, layout) do
    rank = tuple_size(tensor.shape)

    case layout do
      :contiguous ->
        {tensor, :contiguous}

      :transposed when rank >= 2 ->
        perm = Enum.reverse(0..(rank - 1))
        {Core.wrap(Native.transpose(tensor.ref, Enum.to_list(perm))), {:transpose, perm}}

      _ ->
        shape = Tuple.to_list(tensor.shape)
        starts = Enum.map(shape, fn d -> if d > 1, do: 1, else: 0 end)
        strides = Enum.map(shape, fn _ -> 2 end)
        {Core.wrap(Native.slice(tensor.ref, starts, shape, strides)), {:slice, starts}}
    end
  end

  defp random_values(n, type, ties?) do
    for _ <- 1..n do
      cond do
        ties? and type in [:u8, :u16, :u32, :u64] -> :rand.uniform(5)
        ties? -> :rand.uniform(5) - 3
        type in [:f16, :bf16, :f32, :f64] -> Float.round(:rand.normal() * 10, 3)
        type in [:u8, :u16, :u32, :u64] -> :rand.uniform(250)
        true -> :rand.uniform(2001) - 1001
      end
    end
  end

  defp flat(tensor), do: T.to_flat_list(tensor)

  defp as_f64(list), do: Enum.map(list, fn v -> if is_number(v), do: v * 1.0, else: v end)

  test "argsort and sort match numpy's stable sort on every real type and layout" do
    :rand.seed(:exsss, {11, 22, 33})
    types = [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64, :f16, :bf16, :f32, :f64]

    cases =
      for {type, i} <- Enum.with_index(Enum.flat_map(types, &[&1, &1, &1])) do
        rank = rem(i, 3) + 1
        shape = for _ <- 1..rank, do: :rand.uniform(if(rank == 1, do: 90, else: 7))
        n = Enum.product(shape)

        x =
          t(random_values(n, type, rem(i, 2) == 0), type: type) |> T.reshape(List.to_tuple(shape))

        layout = Enum.at([:contiguous, :transposed, :sliced], rem(div(i, 3), 3))
        {x, how} = strided(x, layout)
        axis = :rand.uniform(tuple_size(x.shape)) - 1
        dir = if rem(i, 4) < 2, do: :asc, else: :desc
        %{name: "x#{i}", x: x, how: how, axis: axis, dir: dir, i: i}
      end

    inputs =
      for c <- cases, into: %{} do
        # Send the (rounded) values of the strided view, contiguous.
        {String.to_atom(c.name), {as_f64(flat(c.x)), c.x.shape}}
      end

    code =
      Enum.map_join(cases, "\n", fn c ->
        key =
          if c.dir == :asc,
            do: "#{c.name}",
            else: "-np.unique(#{c.name}.ravel(), return_inverse=True)[1].reshape(#{c.name}.shape)"

        "out['i#{c.i}'] = np.argsort(#{key}, axis=#{c.axis}, kind='stable')\n" <>
          "out['s#{c.i}'] = np.sort(#{c.name}, axis=#{c.axis})" <>
          if(c.dir == :desc,
            do:
              "[tuple(slice(None, None, -1) if d == #{c.axis} else slice(None) for d in range(#{c.name}.ndim))]",
            else: ""
          )
      end)

    ref = EmilyTest.Numpy.run(code, Map.to_list(inputs))

    for c <- cases do
      {_, want_idx} = ref["i#{c.i}"]
      {_, want_sorted} = ref["s#{c.i}"]
      got_idx = flat(T.argsort(c.x, axis: c.axis, direction: c.dir))

      assert got_idx == Enum.map(want_idx, &trunc/1),
             "argsort case #{c.i} #{inspect(c.x.type)} #{c.dir}"

      got = flat(T.sort(c.x, axis: c.axis, direction: c.dir)) |> as_f64()
      assert got == want_sorted, "sort case #{c.i}"
    end
  end

  test "sort puts NaN last ascending and first descending, on every float type" do
    for type <- [:f16, :bf16, :f32, :f64] do
      x = t([1.0, :nan, :neg_infinity, -0.0, :infinity, :nan, -2.5], type: type)
      assert flat(T.sort(x)) == [:neg_infinity, -2.5, -0.0, 1.0, :infinity, :nan, :nan]

      assert flat(T.sort(x, direction: :desc)) == [
               :nan,
               :nan,
               :infinity,
               1.0,
               -0.0,
               -2.5,
               :neg_infinity
             ]

      assert flat(T.argsort(x)) == [2, 6, 3, 0, 4, 1, 5]
      assert flat(T.argsort(x, direction: :desc)) == [1, 5, 4, 0, 3, 6, 2]
    end
  end

  test "long rows sort stably (radix path) with many ties" do
    :rand.seed(:exsss, {1, 2, 3})
    vals = for _ <- 1..5000, do: :rand.uniform(7)
    x = t(vals)
    idx = flat(T.argsort(x))

    expected =
      vals |> Enum.with_index() |> Enum.sort_by(fn {v, i} -> {v, i} end) |> Enum.map(&elem(&1, 1))

    assert idx == expected
    idx_desc = flat(T.argsort(x, direction: :desc))

    expected_desc =
      vals
      |> Enum.with_index()
      |> Enum.sort_by(fn {v, i} -> {-v, i} end)
      |> Enum.map(&elem(&1, 1))

    assert idx_desc == expected_desc
  end

  # ---------------------------------------------------------------------------
  # Property tests against numpy float64
  # ---------------------------------------------------------------------------

  @tol %{{:f, 16} => 1.0e-2, {:bf, 16} => 6.0e-2, {:f, 32} => 2.0e-5, {:f, 64} => 1.0e-12}

  test "sum/mean/variance/std/median/logsumexp/product/max/min vs numpy, random axes, dtypes and layouts" do
    :rand.seed(:exsss, {5, 6, 7})
    types = [:f32, :f64, :f16, :bf16, :s32, :u8, :s8, :s64]

    cases =
      for i <- 0..95 do
        type = Enum.at(types, rem(i, length(types)))
        rank = rem(i, 4) + 1
        shape = for _ <- 1..rank, do: :rand.uniform(6)
        n = Enum.product(shape)

        values =
          if type in [:f32, :f64, :f16, :bf16],
            do: for(_ <- 1..n, do: :rand.normal()),
            else: for(_ <- 1..n, do: :rand.uniform(100) - if(type == :u8, do: 1, else: 50))

        x = t(values, type: type) |> T.reshape(List.to_tuple(shape))
        layout = Enum.at([:contiguous, :transposed, :sliced], rem(div(i, 4), 3))
        {x, _} = strided(x, layout)
        r = tuple_size(x.shape)

        axes =
          case rem(i, 3) do
            0 -> nil
            1 -> [:rand.uniform(r) - 1 - if(:rand.uniform(2) == 1, do: r, else: 0)]
            2 -> Enum.take_random(0..(r - 1), :rand.uniform(r))
          end

        keep = rem(i, 5) == 0
        %{i: i, x: x, axes: axes, keep: keep, ddof: rem(i, 2)}
      end

    inputs = for c <- cases, do: {String.to_atom("x#{c.i}"), {as_f64(flat(c.x)), c.x.shape}}

    np_axes = fn
      nil -> "None"
      axes -> "(" <> Enum.map_join(axes, "", &"#{&1},") <> ")"
    end

    code =
      Enum.map_join(cases, "\n", fn c ->
        x = "x#{c.i}"
        a = np_axes.(c.axes)
        k = if c.keep, do: "True", else: "False"
        axis1 = if c.axes, do: hd(c.axes), else: "None"

        """
        out['sum#{c.i}'] = np.sum(#{x}, axis=#{a}, keepdims=#{k})
        out['prod#{c.i}'] = np.prod(#{x} if #{x}.dtype.kind == 'f' else #{x}, axis=#{a}, keepdims=#{k})
        out['mean#{c.i}'] = np.mean(#{x}, axis=#{a}, keepdims=#{k})
        out['var#{c.i}'] = np.var(#{x}, axis=#{a}, keepdims=#{k}, ddof=#{c.ddof})
        out['std#{c.i}'] = np.std(#{x}, axis=#{a}, keepdims=#{k}, ddof=#{c.ddof})
        out['max#{c.i}'] = np.max(#{x}, axis=#{a}, keepdims=#{k})
        out['min#{c.i}'] = np.min(#{x}, axis=#{a}, keepdims=#{k})
        m = np.max(#{x}, axis=#{a}, keepdims=True)
        out['lse#{c.i}'] = np.log(np.sum(np.exp(#{x} - m), axis=#{a}, keepdims=#{k})) + (m if #{k} else np.squeeze(m, axis=#{a}))
        out['med#{c.i}'] = np.median(#{x}, axis=#{axis1})
        """
      end)

    ref = EmilyTest.Numpy.run(code, inputs)

    for c <- cases do
      x = c.x
      type = x.type
      opts = [axes: c.axes, keep_axes: c.keep]
      float_type = if Emily.Tensor.Type.float?(type), do: type, else: {:f, 32}
      tol = @tol[float_type]
      ctx = "case #{c.i} #{inspect(type)} #{inspect(x.shape)} #{inspect(opts)}"

      exact = not Emily.Tensor.Type.float?(type)
      check(T.sum(x, opts), ref["sum#{c.i}"], if(exact, do: 0.0, else: tol), ctx <> " sum")
      check(T.reduce_max(x, opts), ref["max#{c.i}"], 0.0, ctx <> " max")
      check(T.reduce_min(x, opts), ref["min#{c.i}"], 0.0, ctx <> " min")
      check(T.mean(x, opts), ref["mean#{c.i}"], tol, ctx <> " mean")
      n = reduced(x, c.axes)

      if n - c.ddof > 0 do
        check(T.variance(x, opts ++ [ddof: c.ddof]), ref["var#{c.i}"], 4 * tol, ctx <> " var")

        check(
          T.standard_deviation(x, opts ++ [ddof: c.ddof]),
          ref["std#{c.i}"],
          4 * tol,
          ctx <> " std"
        )
      end

      check(T.logsumexp(x, opts), ref["lse#{c.i}"], tol, ctx <> " logsumexp")

      if Emily.Tensor.Type.float?(type) do
        check(T.product(x, opts), ref["prod#{c.i}"], 4 * tol, ctx <> " product")
      end

      med = if c.axes, do: T.median(x, axis: hd(c.axes)), else: T.median(x)

      check(med, ref["med#{c.i}"], tol, ctx <> " median")
    end
  end

  defp reduced(x, nil), do: Enum.product(Tuple.to_list(x.shape))

  defp reduced(x, axes) do
    r = tuple_size(x.shape)
    Enum.reduce(axes, 1, fn a, acc -> acc * elem(x.shape, rem(a + r, r)) end)
  end

  defp check(got, {shape, want}, tol, ctx) do
    assert got.shape == shape, "#{ctx}: shape #{inspect(got.shape)} != #{inspect(shape)}"

    Enum.zip(flat(got), want)
    |> Enum.each(fn
      {g, w} when is_number(g) and is_number(w) ->
        assert abs(g - w) <= tol * (abs(w) + 1), "#{ctx}: got #{g}, want #{w}"

      {g, w} ->
        assert g == w, "#{ctx}: got #{inspect(g)}, want #{inspect(w)}"
    end)
  end
end
