defmodule Emily.Backend.ElementwiseTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  import Kernel, except: [abs: 1]
  alias EmilyTest.Numpy

  @float_types [{:f, 32}, {:f, 64}, {:f, 16}, {:bf, 16}]
  @rtol %{{:f, 32} => 1.0e-5, {:f, 64} => 1.0e-12, {:f, 16} => 2.0e-3, {:bf, 16} => 1.6e-2}
  @atol %{{:f, 32} => 1.0e-6, {:f, 64} => 1.0e-14, {:f, 16} => 1.0e-3, {:bf, 16} => 1.0e-2}
  @max %{
    {:f, 32} => 3.4028234663852886e38,
    {:f, 64} => 1.7976931348623157e308,
    {:f, 16} => 65504.0,
    {:bf, 16} => 3.3895313892515355e38
  }

  # {function, numpy expression over `x`, input domain}
  @math [
    {:exp, "np.exp(x)", :gen},
    {:expm1, "np.expm1(x)", :gen},
    {:log, "np.log(x)", :pos},
    {:log1p, "np.log1p(x)", :pos},
    {:sigmoid, "1 / (1 + np.exp(-x))", :gen},
    {:cos, "np.cos(x)", :gen},
    {:sin, "np.sin(x)", :gen},
    {:tan, "np.tan(x)", :gen},
    {:cosh, "np.cosh(x)", :gen},
    {:sinh, "np.sinh(x)", :gen},
    {:tanh, "np.tanh(x)", :gen},
    {:acos, "np.arccos(x)", :unit},
    {:asin, "np.arcsin(x)", :unit},
    {:atan, "np.arctan(x)", :gen},
    {:acosh, "np.arccosh(x)", :ge1},
    {:asinh, "np.arcsinh(x)", :gen},
    {:atanh, "np.arctanh(x)", :unit},
    {:sqrt, "np.sqrt(x)", :pos},
    {:rsqrt, "1 / np.sqrt(x)", :pos},
    {:cbrt, "np.cbrt(x)", :gen},
    {:erf, "np.vectorize(math.erf, otypes=[float])(x)", :gen},
    {:erfc, "np.vectorize(math.erfc, otypes=[float])(x)", :gen},
    {:erf_inv, "erfinv(x)", :unit},
    {:log2, "np.log(x) / np.float64(np.float32(np.log(2)))", :pos},
    {:log10, "np.log(x) / np.float64(np.float32(np.log(10)))", :pos}
  ]

  @numpy_prelude """
  import math
  def erfinv(y):
      def one(v):
          if math.isnan(v) or abs(v) > 1: return math.nan
          if abs(v) == 1: return math.copysign(math.inf, v)
          if abs(v) < 1e-9: return v * math.sqrt(math.pi) / 2
          a, lo, hi = abs(v), 0.0, 6.0
          for _ in range(2000):
              mid = (lo + hi) / 2
              if mid in (lo, hi): break
              below = math.erf(mid) < a if a <= 0.5 else math.erfc(mid) > 1 - a
              lo, hi = (mid, hi) if below else (lo, mid)
          return math.copysign(lo, v)
      return np.vectorize(one, otypes=[float])(y)
  """

  @edges [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, :nan, :infinity, :neg_infinity, 1.0e-30, 80.0, -90.0]

  defp domain_values(:gen, rand), do: @edges ++ Enum.map(rand, &(&1 * 8 - 4))

  defp domain_values(:pos, rand),
    do: [0.0, 1.0e-30, 1.0, 2.0, :infinity, :nan, -1.0] ++ Enum.map(rand, &(&1 * 50))

  defp domain_values(:unit, rand),
    do: [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, :nan] ++ Enum.map(rand, &(&1 * 2 - 1))

  defp domain_values(:ge1, rand),
    do: [1.0, 0.5, :infinity, :nan] ++ Enum.map(rand, &(1 + &1 * 20))

  defp rand_list(n, seed) do
    :rand.seed(:exsss, {seed, 7, 11})
    for _ <- 1..n, do: :rand.uniform()
  end

  defp values(t), do: Nx.to_flat_list(t)

  # Compares Emily's values with a float64 reference rounded to `type`'s
  # range: NaN matches NaN, infinities match exactly, finite values within
  # rtol/atol.
  defp assert_close(got, want, type, what) do
    rtol = @rtol[type]
    atol = @atol[type]
    max = @max[type]
    assert length(got) == length(want), what

    Enum.zip(got, want)
    |> Enum.with_index()
    |> Enum.each(fn {{g, w}, i} ->
      w =
        if is_float(w) and Kernel.abs(w) - max > max * rtol,
          do: if(w > 0, do: :infinity, else: :neg_infinity),
          else: w

      ok =
        case {g, w} do
          {x, x} ->
            true

          {g, w} when is_float(g) and is_float(w) ->
            Kernel.abs(g - w) <= atol + rtol * Kernel.abs(w)

          _ ->
            false
        end

      assert ok, "#{what}: element #{i}: got #{inspect(g)}, wanted #{inspect(w)}"
    end)
  end

  defp sign_bit(t) do
    bits = elem(t.type, 1)
    for <<x::size(bits)-native <- Nx.to_binary(t)>>, do: Bitwise.bsr(x, bits - 1)
  end

  describe "unary math vs numpy float64" do
    test "every floating function, every float type, contiguous and strided" do
      rand = rand_list(40, 1)

      # Inputs as each type stores them, then one numpy call for everything.
      cases =
        for {fun, expr, dom} <- @math, type <- @float_types do
          t = Nx.tensor(domain_values(dom, rand), type: type)
          {fun, expr, type, t}
        end

      inputs =
        cases
        |> Enum.with_index()
        |> Enum.map(fn {{_, _, _, t}, i} ->
          vs = values(t)
          {:"x#{i}", {vs, {length(vs)}}}
        end)

      code =
        @numpy_prelude <>
          (cases
           |> Enum.with_index()
           |> Enum.map_join("\n", fn {{_, expr, _, _}, i} ->
             "x = x#{i}\nout['r#{i}'] = #{expr}"
           end))

      refs = Numpy.run(code, inputs)

      for {{fun, _expr, type, t}, i} <- Enum.with_index(cases) do
        {_, want} = refs["r#{i}"]
        out = apply(Nx, fun, [t])
        # Nx defines log2/log10 as log(x) / log(base), base an f32 scalar.
        want_type = if fun in [:log2, :log10], do: Nx.Type.merge(type, {:f, 32}), else: type
        assert out.type == want_type, "#{fun} #{inspect(type)}: got #{inspect(out.type)}"
        assert_close(values(out), want, type, "#{fun} #{inspect(type)}")
      end

      # Strided: a transposed 2-D view of each type.
      m = for r <- 0..5, do: for(c <- 0..6, do: :math.sin(r * 7 + c) * 0.9)
      flat_t = for c <- 0..6, r <- 0..5, do: Enum.at(Enum.at(m, r), c)

      strided =
        for {fun, expr, dom} <- @math, dom != :ge1, type <- @float_types do
          src = Nx.tensor(m, type: type)
          tr = wrap(Emily.Native.transpose(src.data.ref, [1, 0]))
          {fun, expr, type, tr}
        end

      src_vals =
        Map.new(@float_types, fn type -> {type, values(Nx.tensor(flat_t, type: type))} end)

      inputs =
        Enum.map(@float_types, fn type ->
          {:"s#{elem(type, 1)}#{elem(type, 0)}", {src_vals[type], {42}}}
        end)

      code =
        @numpy_prelude <>
          (strided
           |> Enum.with_index()
           |> Enum.map_join("\n", fn {{_, expr, type, _}, i} ->
             "x = #{if String.contains?(expr, ["log", "sqrt"]), do: "np.abs(s#{elem(type, 1)}#{elem(type, 0)})", else: "s#{elem(type, 1)}#{elem(type, 0)}"}\nout['r#{i}'] = #{expr}"
           end))

      refs = Numpy.run(code, inputs)

      for {{fun, expr, type, tr}, i} <- Enum.with_index(strided) do
        tr = if String.contains?(expr, ["log", "sqrt"]), do: Nx.abs(tr), else: tr
        {_, want} = refs["r#{i}"]
        out = apply(Nx, fun, [tr])
        assert out.shape == {7, 6}
        assert_close(values(out), want, type, "strided #{fun} #{inspect(type)}")
      end
    end

    test "odd functions keep -0.0; integers become f32" do
      for fun <- [
            :sin,
            :tan,
            :asin,
            :atan,
            :sinh,
            :tanh,
            :asinh,
            :atanh,
            :cbrt,
            :erf,
            :erf_inv,
            :expm1,
            :log1p,
            :sqrt
          ],
          type <- @float_types do
        out = apply(Nx, fun, [Nx.tensor([-0.0, 0.0], type: type)])
        assert sign_bit(out) == [1, 0], "#{fun} #{inspect(type)}"
      end

      for type <- [:u8, :s8, :s32, :u64, :s64] do
        out = Nx.exp(Nx.tensor([0, 1], type: type))
        assert out.type == {:f, 32}
        assert values(out) == [1.0, 2.7182817459106445]
        assert Nx.divide(Nx.tensor([1], type: type), 2).type == {:f, 32}
      end

      assert Nx.log(Nx.tensor([1.0], type: :f64)).type == {:f, 64}
      assert Nx.sqrt(Nx.tensor([4], type: :s64)) |> values() == [2.0]
    end

    test "complex inputs vs numpy complex128" do
      rand = rand_list(48, 2)
      {re, im} = Enum.split(Enum.map(rand, &(&1 * 4 - 2)), 24)

      funs = [
        :exp,
        :expm1,
        :log,
        :log1p,
        :sigmoid,
        :cos,
        :sin,
        :tan,
        :cosh,
        :sinh,
        :tanh,
        :acos,
        :asin,
        :atan,
        :acosh,
        :asinh,
        :atanh,
        :sqrt,
        :rsqrt,
        :cbrt
      ]

      np = %{
        exp: "np.exp(z)",
        expm1: "np.exp(z) - 1",
        log: "np.log(z)",
        log1p: "np.log(1 + z)",
        sigmoid: "1 / (1 + np.exp(-z))",
        cos: "np.cos(z)",
        sin: "np.sin(z)",
        tan: "np.tan(z)",
        cosh: "np.cosh(z)",
        sinh: "np.sinh(z)",
        tanh: "np.tanh(z)",
        acos: "np.arccos(z)",
        asin: "np.arcsin(z)",
        atan: "np.arctan(z)",
        acosh: "np.arccosh(z)",
        asinh: "np.arcsinh(z)",
        atanh: "np.arctanh(z)",
        sqrt: "np.sqrt(z)",
        rsqrt: "1 / np.sqrt(z)",
        cbrt: "z ** (1 / 3)"
      }

      z = Nx.complex(Nx.tensor(re, type: :f64), Nx.tensor(im, type: :f64))
      assert z.type == {:c, 128}
      z64 = Nx.as_type(z, :c64)

      refs =
        Numpy.run(
          "z = re + 1j * im\n" <> Enum.map_join(funs, "\n", &"out['#{&1}'] = #{np[&1]}"),
          re: {re, {24}},
          im: {im, {24}}
        )

      for fun <- funs, {t, tol} <- [{z, 1.0e-12}, {z64, 2.0e-5}] do
        {_, want} = refs["#{fun}"]
        got = apply(Nx, fun, [t])
        assert got.type == t.type

        for {%Complex{re: gr, im: gi}, {wr, wi}} <- Enum.zip(values(got), want) do
          mag = Kernel.abs(wr) + Kernel.abs(wi)

          assert Kernel.abs(gr - wr) <= tol * (1 + mag) and
                   Kernel.abs(gi - wi) <= tol * (1 + mag),
                 "#{fun} #{inspect(t.type)}: got #{gr}+#{gi}i, wanted #{wr}+#{wi}i"
        end
      end

      for fun <- [:erf, :erfc, :erf_inv] do
        assert_raise ArgumentError, "Nx.#{fun}/1 does not support complex inputs", fn ->
          apply(Nx, fun, [z])
        end
      end
    end
  end

  describe "complex parts" do
    test "real, imag, conjugate, phase, abs and complex/2" do
      z =
        Nx.tensor([Complex.new(3, 4), Complex.new(-1, 0), Complex.new(0, -2)],
          type: :c128
        )

      assert Nx.real(z) |> values() == [3.0, -1.0, 0.0]
      assert Nx.imag(z) |> values() == [4.0, 0.0, -2.0]
      assert Nx.real(z).type == {:f, 64}
      assert Nx.abs(z) |> values() == [5.0, 1.0, 2.0]
      assert Nx.abs(z).type == {:f, 64}

      assert Nx.conjugate(z) |> values() == [
               Complex.new(3, -4),
               Complex.new(-1, -0.0),
               Complex.new(0, 2)
             ]

      [a, b, c] = Nx.phase(z) |> values()
      assert_in_delta a, :math.atan2(4, 3), 1.0e-15
      assert b == :math.pi()
      assert c == -:math.pi() / 2
      assert Nx.real(Nx.tensor([1, 2], type: :s8)).type == {:f, 32}
      assert Nx.imag(Nx.tensor([1.5], type: :f16)) |> values() == [0.0]
      assert Nx.imag(Nx.tensor([1.5], type: :f16)).type == {:f, 16}
      assert Nx.conjugate(Nx.tensor([1.0], type: :f64)).type == {:c, 128}
      assert Nx.complex(1, 2).type == {:c, 64}
      assert Nx.complex(Nx.tensor([1.0], type: :f16), 0).type == {:c, 64}

      assert_raise ArgumentError, "Nx.complex/2 does not support complex inputs", fn ->
        Nx.complex(z, 1)
      end
    end
  end

  describe "rounding, sign and predicates" do
    test "integers are the identity; complex raises" do
      t = Nx.tensor([-3, 0, 7], type: :s16)
      for f <- [:floor, :ceil, :round], do: assert(apply(Nx, f, [t]) == t)

      for f <- [:floor, :ceil, :round] do
        assert_raise ArgumentError, "Nx.#{f}/1 does not support complex inputs", fn ->
          apply(Nx, f, [Nx.tensor([Complex.new(1, 1)])])
        end
      end

      for type <- @float_types do
        x = Nx.tensor([-2.5, -0.5, 0.5, 2.5, 1.5], type: type)
        assert values(Nx.round(x)) == [-3.0, -1.0, 1.0, 3.0, 2.0]
        assert sign_bit(Nx.ceil(Nx.tensor([-0.5], type: type))) == [1]

        assert values(Nx.sign(Nx.tensor([-2.0, 0.0, 3.0, :nan], type: type))) == [
                 -1.0,
                 0.0,
                 1.0,
                 :nan
               ]

        assert values(Nx.is_nan(Nx.tensor([:nan, 1.0], type: type))) == [1, 0]
        assert values(Nx.is_infinity(Nx.tensor([:neg_infinity, 1.0], type: type))) == [1, 0]
      end

      assert values(Nx.abs(Nx.tensor([200], type: :u8))) == [200]
      assert values(Nx.abs(Nx.tensor([-128], type: :s8))) == [-128]
      assert values(Nx.negate(Nx.tensor([-128, 5], type: :s8))) == [-128, -5]
      assert Nx.is_nan(Nx.tensor([1, 2])).type == {:u, 8}
      assert values(Nx.is_nan(Nx.tensor([1, 2]))) == [0, 0]
      assert values(Nx.sign(Nx.tensor([0, 5], type: :u32))) == [0, 1]
    end

    test "bit counts and bitwise_not on every integer type; floats raise" do
      for {type, bits} <- [u8: 8, u16: 16, u32: 32, u64: 64, s8: 8, s16: 16, s32: 32, s64: 64] do
        t = Nx.tensor([0, 1, 5, 2 ** (bits - 2)], type: type)
        assert values(Nx.population_count(t)) == [0, 1, 2, 1]
        assert values(Nx.count_leading_zeros(t)) == [bits, bits - 1, bits - 3, 1]
        assert values(Nx.bitwise_not(Nx.bitwise_not(t))) == values(t)
      end

      assert values(Nx.population_count(Nx.tensor([-1], type: :s64))) == [64]

      for f <- [:bitwise_not, :population_count, :count_leading_zeros] do
        assert_raise ArgumentError,
                     ~r/bitwise operators expect integer tensors.*\{:f, 64\}/,
                     fn ->
                       apply(Nx, f, [Nx.tensor([1.0], type: :f64)])
                     end
      end
    end
  end

  describe "binary ops" do
    test "float arithmetic vs numpy on every float type, contiguous and broadcast/strided" do
      rand = rand_list(64, 3)
      {a, b} = Enum.split(Enum.map(rand, &(&1 * 10 - 5)), 32)
      a = [0.0, -0.0, :nan, :infinity, 1.0, 2.0] ++ a
      b = [1.0, 0.0, 2.0, :infinity, :neg_infinity, -0.0] ++ b

      ops = %{
        add: "x + y",
        subtract: "x - y",
        multiply: "x * y",
        divide: "x / y",
        pow: "np.power(np.abs(x), y)",
        remainder: "np.fmod(x, y)",
        atan2: "np.arctan2(x, y)",
        max: "np.maximum(x, y)",
        min: "np.minimum(x, y)"
      }

      for type <- @float_types do
        ta = Nx.tensor(a, type: type)
        tb = Nx.tensor(b, type: type)
        inputs = [x: {values(ta), {38}}, y: {values(tb), {38}}]
        refs = Numpy.run(Enum.map_join(ops, "\n", fn {k, v} -> "out['#{k}'] = #{v}" end), inputs)

        for {op, _} <- ops do
          left = if op == :pow, do: Nx.abs(ta), else: ta
          out = apply(Nx, op, [left, tb])
          assert out.type == type
          {_, want} = refs["#{op}"]
          assert_close(values(out), want, type, "#{op} #{inspect(type)}")
        end
      end

      # Broadcast of a column against a transposed (strided) matrix.
      m = Nx.tensor(for(r <- 0..3, do: for(c <- 0..2, do: r * 3 + c * 1.5)), type: :f32)
      mt = wrap(Emily.Native.transpose(m.data.ref, [1, 0]))
      col = Nx.tensor([[1.0], [2.0], [4.0]])

      assert Nx.divide(mt, col) |> Nx.to_list() ==
               [[0.0, 3.0, 6.0, 9.0], [0.75, 2.25, 3.75, 5.25], [0.75, 1.5, 2.25, 3.0]]

      assert Nx.greater(mt, col) |> Nx.to_list() == [[0, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1]]
    end

    test "integer overflow wraps, promotion follows Nx" do
      for {type, lo, hi, bits} <- [{:s8, -128, 127, 8}, {:u8, 0, 255, 8}] do
        vals = Enum.to_list(lo..hi//7)
        t = Nx.tensor(vals, type: type)
        u = Nx.tensor(Enum.reverse(vals), type: type)

        wrap = fn v ->
          v = Bitwise.band(v, 2 ** bits - 1)
          if type == :s8 and v >= 128, do: v - 256, else: v
        end

        assert values(Nx.add(t, u)) == Enum.zip_with(vals, Enum.reverse(vals), &wrap.(&1 + &2))

        assert values(Nx.multiply(t, u)) ==
                 Enum.zip_with(vals, Enum.reverse(vals), &wrap.(&1 * &2))

        assert values(Nx.subtract(t, u)) ==
                 Enum.zip_with(vals, Enum.reverse(vals), &wrap.(&1 - &2))

        assert Nx.add(t, u).type == Nx.type(t)
      end

      u8 = Nx.tensor([1], type: :u8)
      s8 = Nx.tensor([1], type: :s8)
      assert Nx.add(u8, s8).type == {:s, 16}
      assert Nx.add(u8, 256).type == {:u, 16}
      assert Nx.add(u8, -1).type == {:s, 16}
      assert Nx.add(u8, 1.0).type == {:f, 32}
      assert Nx.add(Nx.tensor([1.0], type: :f16), 1.0).type == {:f, 16}
      assert Nx.add(Nx.tensor([1], type: :s64), Nx.tensor([1.0], type: :f32)).type == {:f, 32}
      assert Nx.add(Nx.tensor([1.0], type: :bf16), Nx.tensor([1.0], type: :f16)).type == {:f, 16}
      assert Nx.add(Nx.tensor([1.0], type: :f64), Complex.new(0, 1)).type == {:c, 128}
      assert Nx.add(1, 2.0).type == {:f, 32}
      assert Nx.divide(u8, s8).type == {:f, 32}
      assert Nx.divide(Nx.tensor([1.0], type: :f64), 2).type == {:f, 64}
      assert Nx.atan2(1, 1).type == {:f, 32}

      assert values(Nx.quotient(Nx.tensor([-7, 7], type: :s8), Nx.tensor([2], type: :u8))) == [
               -3,
               3
             ]

      assert Nx.quotient(Nx.tensor([-7, 7], type: :s8), Nx.tensor([2], type: :u8)).type ==
               {:s, 16}

      assert values(Nx.remainder(Nx.tensor([-7, 7]), -2)) == [-1, 1]
      assert values(Nx.pow(Nx.tensor([2], type: :s8), 7)) == [-128]

      assert values(Nx.pow(Nx.tensor([3], type: :u64), 40)) == [
               Bitwise.band(3 ** 40, 2 ** 64 - 1)
             ]

      assert values(Nx.left_shift(Nx.tensor([1], type: :u8), Nx.tensor([7, 8]))) == [128, 256]
      assert values(Nx.right_shift(Nx.tensor([-8, 255], type: :s16), 2)) == [-2, 63]
      assert values(Nx.right_shift(Nx.tensor([128], type: :u8), 7)) == [1]
    end

    test "comparisons and logical ops give u8; NaN compares false" do
      x = Nx.tensor([1.0, :nan, 3.0])
      y = Nx.tensor([1, 2, 4], type: :s64)

      for {op, want} <- [
            equal: [1, 0, 0],
            not_equal: [0, 1, 1],
            less: [0, 0, 1],
            less_equal: [1, 0, 1],
            greater: [0, 0, 0],
            greater_equal: [1, 0, 0]
          ] do
        out = apply(Nx, op, [x, y])
        assert out.type == {:u, 8}
        assert values(out) == want, "#{op}"
      end

      assert values(Nx.logical_and(x, 0)) == [0, 0, 0]
      assert values(Nx.logical_or(x, 0)) == [1, 1, 1]
      assert values(Nx.logical_xor(Nx.tensor([0, 2, 3]), Nx.tensor([0.0, 0.5, 0.0]))) == [0, 0, 1]
      assert values(Nx.logical_not(x)) == [0, 0, 0]
      c = Nx.tensor([Complex.new(1, 1), Complex.new(0, 0)])
      assert values(Nx.equal(c, Complex.new(1, 1))) == [1, 0]
      assert values(Nx.logical_not(c)) == [0, 1]
    end
  end

  describe "select and clip" do
  end
end
