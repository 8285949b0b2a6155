defmodule Emily.Backend.CumulativeTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias Emily.Native
  alias EmilyTest.Numpy

  defp t(list, opts \\ []), do: Nx.tensor(list, opts)

  describe "semantics" do
    test "the type is kept and integers wrap" do
      x = Nx.cumulative_sum(t([100, 100, 100], type: :s8))
      assert x.type == {:s, 8}
      assert Nx.to_list(x) == [100, -56, 44]
      assert Nx.cumulative_sum(t([200, 100], type: :u8)) |> Nx.to_list() == [200, 44]
      assert Nx.cumulative_product(t([1.5, 2.0], type: :f16)).type == {:f, 16}
      assert Nx.cumulative_max(t([1, 0, 1], type: :u8)).type == {:u, 8}
    end

    test "NaN propagates through max and min" do
      x = t([1.0, :nan, 3.0, -1.0])
      assert Nx.to_list(Nx.cumulative_max(x)) == [1.0, :nan, :nan, :nan]
      assert Nx.to_list(Nx.cumulative_min(x, reverse: true)) == [:nan, :nan, -1.0, -1.0]
    end

    test "complex sum and product" do
      z = t([Complex.new(1, 1), Complex.new(2, -1), Complex.new(0, 2)])

      assert Nx.cumulative_sum(z) |> Nx.to_list() ==
               [Complex.new(1, 1), Complex.new(3, 0), Complex.new(3, 2)]

      assert Nx.cumulative_product(z) |> Nx.to_list() ==
               [Complex.new(1, 1), Complex.new(3, 1), Complex.new(-2, 6)]

      assert_raise ArgumentError, ~r/complex/, fn -> Nx.cumulative_max(z) end
    end

    test "options and axes are validated" do
      assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.cumulative_sum(t([1]), foo: 1) end

      assert_raise ArgumentError, ~r/invalid for shape with rank 1/, fn ->
        Nx.cumulative_sum(t([1]), axis: 1)
      end

      assert_raise ArgumentError, ~r/rank 0/, fn -> Nx.cumulative_sum(t(1)) end
      assert_raise ArgumentError, ~r/boolean/, fn -> Nx.cumulative_sum(t([1]), reverse: 1) end
    end
  end

  describe "numpy oracle" do
    @tag :numpy
    test "random float64 inputs, every axis, reverse, strided views" do
      :rand.seed(:exsss, {11, 22, 33})
      shape = {4, 5, 6}
      n = 120
      vals = for _ <- 1..n, do: :rand.uniform() * 2 - 1
      base = t(vals, type: :f64) |> Nx.reshape(shape)
      # A transposed (strided) view of the same data.
      tr = wrap(Native.transpose(base.data.ref, [2, 0, 1]))

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
            sum: &Nx.cumulative_sum/2,
            product: &Nx.cumulative_product/2,
            max: &Nx.cumulative_max/2,
            min: &Nx.cumulative_min/2
          ],
          ax <- 0..2 do
        check(fun.(base, axis: ax), refs["#{name}_#{ax}"])
        check(fun.(base, axis: ax, reverse: true), refs["#{name}_#{ax}_r"])
        check(fun.(tr, axis: ax), refs["#{name}_t#{ax}"])

        # f32 and f16 versions of the same data, looser tolerances.
        for {type, tol} <- [f32: 1.0e-5, f16: 2.0e-2] do
          got = fun.(Nx.as_type(base, type), axis: ax)
          assert got.type == Nx.Type.normalize!(type)
          {_, want} = refs["#{name}_#{ax}"]
          assert_close(Nx.to_flat_list(got), want, tol)
        end
      end
    end

    test "integer types against exact sums" do
      for type <- [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64] do
        x = Nx.iota({3, 4}, type: type)
        want = Enum.map(0..2, fn r -> Enum.scan(Enum.map(0..3, &(4 * r + &1)), &(&1 + &2)) end)
        assert Nx.to_list(Nx.cumulative_sum(x, axis: 1)) == want
      end
    end
  end

  defp check(got, {shape, want}) do
    assert got.shape == shape
    assert_close(Nx.to_flat_list(got), want, 1.0e-12)
  end

  defp assert_close(got, want, tol) do
    assert length(got) == length(want)

    Enum.zip(got, want)
    |> Enum.each(fn {g, w} ->
      assert abs(g - w) <= tol * max(1.0, abs(w)), "got #{g}, want #{w}"
    end)
  end
end
