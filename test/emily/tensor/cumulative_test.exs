defmodule Emily.Tensor.CumulativeTest do
  use ExUnit.Case, async: true

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.Core
  alias EmilyTest.Numpy

  doctest Emily.Tensor.Cumulative

  defp t(list, opts \\ []), do: T.tensor(list, opts)
  defp nx(text), do: String.replace(String.trim(text), "#Nx.Tensor<", "#Emily.Tensor<")
  defp assert_prints(tensor, text), do: assert(inspect(tensor) == nx(text))

  describe "Nx examples" do
    test "cumulative_sum" do
      assert_prints(T.cumulative_sum(t([1, 2, 3, 4])), """
      #Nx.Tensor<
        s32[4]
        [1, 3, 6, 10]
      >
      """)

      assert_prints(T.cumulative_sum(T.iota({3, 3}), axis: 0), """
      #Nx.Tensor<
        s32[3][3]
        [
          [0, 1, 2],
          [3, 5, 7],
          [9, 12, 15]
        ]
      >
      """)

      assert_prints(T.cumulative_sum(T.iota({3, 3}), axis: 1, reverse: true), """
      #Nx.Tensor<
        s32[3][3]
        [
          [3, 3, 2],
          [12, 9, 5],
          [21, 15, 8]
        ]
      >
      """)
    end

    test "cumulative_product, max, min" do
      assert T.to_list(T.cumulative_product(t([1, 2, 3, 4]))) == [1, 2, 6, 24]

      assert T.to_list(T.cumulative_product(T.iota({3, 3}), axis: 0)) ==
               [[0, 1, 2], [0, 4, 10], [0, 28, 80]]

      assert T.to_list(T.cumulative_max(t([3, 4, 2, 1]))) == [3, 4, 4, 4]
      assert T.to_list(T.cumulative_max(t([3, 4, 2, 1]), reverse: true)) == [4, 4, 2, 1]
      assert T.to_list(T.cumulative_min(t([3, 4, 2, 1]))) == [3, 3, 2, 1]
      assert T.to_list(T.cumulative_min(t([3, 4, 2, 1]), reverse: true)) == [1, 1, 1, 1]

      assert T.to_list(T.cumulative_min(t([[2, 3, 1], [1, 3, 2], [2, 1, 3]]), axis: -1)) ==
               [[2, 2, 1], [1, 1, 1], [2, 1, 1]]
    end
  end

  describe "semantics" do
    test "the type is kept and integers wrap" do
      x = T.cumulative_sum(t([100, 100, 100], type: :s8))
      assert x.type == {:s, 8}
      assert T.to_list(x) == [100, -56, 44]
      assert T.cumulative_sum(t([200, 100], type: :u8)) |> T.to_list() == [200, 44]
      assert T.cumulative_product(t([1.5, 2.0], type: :f16)).type == {:f, 16}
      assert T.cumulative_max(t([1, 0, 1], type: :u8)).type == {:u, 8}
    end

    test "NaN propagates through max and min" do
      x = t([1.0, :nan, 3.0, -1.0])
      assert T.to_list(T.cumulative_max(x)) == [1.0, :nan, :nan, :nan]
      assert T.to_list(T.cumulative_min(x, reverse: true)) == [:nan, :nan, -1.0, -1.0]
    end

    test "complex sum and product" do
      z = t([Emily.Complex.new(1, 1), Emily.Complex.new(2, -1), Emily.Complex.new(0, 2)])
      assert T.cumulative_sum(z) |> T.to_list() ==
               [Emily.Complex.new(1, 1), Emily.Complex.new(3, 0), Emily.Complex.new(3, 2)]

      assert T.cumulative_product(z) |> T.to_list() ==
               [Emily.Complex.new(1, 1), Emily.Complex.new(3, 1), Emily.Complex.new(-2, 6)]

      assert_raise ArgumentError, ~r/not supported for complex/, fn -> T.cumulative_max(z) end
    end

    test "options and axes are validated" do
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.cumulative_sum(t([1]), foo: 1) end
      assert_raise ArgumentError, ~r/invalid for shape with rank 1/, fn ->
        T.cumulative_sum(t([1]), axis: 1)
      end

      assert_raise ArgumentError, ~r/rank 0/, fn -> T.cumulative_sum(t(1)) end
      assert_raise ArgumentError, ~r/boolean/, fn -> T.cumulative_sum(t([1]), reverse: 1) end
    end
  end

  describe "numpy oracle" do
    @tag :numpy
    test "random float64 inputs, every axis, reverse, strided views" do
      :rand.seed(:exsss, {11, 22, 33})
      shape = {4, 5, 6}
      n = 120
      vals = for _ <- 1..n, do: :rand.uniform() * 2 - 1
      base = t(vals, type: :f64) |> T.reshape(shape)
      # A transposed (strided) view of the same data.
      tr = Core.wrap(Native.transpose(base.ref, [2, 0, 1]))

      code = """
      ops = {'sum': np.cumsum, 'product': np.cumprod,
             'max': np.maximum.accumulate, 'min': np.minimum.accumulate}
      for name, f in ops.items():
          for ax in range(3):
              out[f'{name}_{ax}'] = f(x, axis=ax)
              out[f'{name}_{ax}_r'] = np.flip(f(np.flip(x, ax), axis=ax), ax)
              out[f'{name}_t{ax}'] = f(np.transpose(x, (2, 0, 1)), axis=ax)
      """

      refs = Numpy.run(code, x: {vals, shape})

      for {name, fun} <- [
            sum: &T.cumulative_sum/2,
            product: &T.cumulative_product/2,
            max: &T.cumulative_max/2,
            min: &T.cumulative_min/2
          ],
          ax <- 0..2 do
        check(fun.(base, axis: ax), refs["#{name}_#{ax}"])
        check(fun.(base, axis: ax, reverse: true), refs["#{name}_#{ax}_r"])
        check(fun.(tr, axis: ax), refs["#{name}_t#{ax}"])

        # f32 and f16 versions of the same data, looser tolerances.
        for {type, tol} <- [f32: 1.0e-5, f16: 2.0e-2] do
          got = fun.(T.as_type(base, type), axis: ax)
          assert got.type == Emily.Tensor.Type.normalize!(type)
          {_, want} = refs["#{name}_#{ax}"]
          assert_close(T.to_flat_list(got), want, tol)
        end
      end
    end

    test "integer types against exact sums" do
      for type <- [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64] do
        x = T.iota({3, 4}, type: type)
        want = Enum.map(0..2, fn r -> Enum.scan(Enum.map(0..3, &(4 * r + &1)), &(&1 + &2)) end)
        assert T.to_list(T.cumulative_sum(x, axis: 1)) == want
      end
    end
  end

  defp check(got, {shape, want}) do
    assert got.shape == shape
    assert_close(T.to_flat_list(got), want, 1.0e-12)
  end

  defp assert_close(got, want, tol) do
    assert length(got) == length(want)

    Enum.zip(got, want)
    |> Enum.each(fn {g, w} ->
      assert abs(g - w) <= tol * max(1.0, abs(w)), "got #{g}, want #{w}"
    end)
  end
end
