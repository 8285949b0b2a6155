defmodule Emily.Backend.WindowTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  @py_ref """
  def windows(x, window, strides, pad, dil, fill):
      pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pad]
      xp = np.pad(x, pads, constant_values=fill)
      crop = tuple(slice(max(-lo, 0), xp.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pad))
      xp = xp[crop]
      n = x.ndim
      outs = [(xp.shape[i] - ((window[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(n)]
      res = np.empty(tuple(outs) + tuple(window))
      for o in np.ndindex(*outs):
          sl = tuple(slice(o[i] * strides[i], o[i] * strides[i] + (window[i] - 1) * dil[i] + 1, dil[i]) for i in range(n))
          res[o] = xp[sl]
      return res
  FILL = {'sum': 0.0, 'product': 1.0, 'max': -np.inf, 'min': np.inf}
  RED = {'sum': np.sum, 'product': np.prod, 'max': np.max, 'min': np.min}
  def wred(op, x, window, strides, pad, dil):
      w = windows(x, window, strides, pad, dil, FILL[op])
      return RED[op](w, axis=tuple(range(x.ndim, 2 * x.ndim)))
  def scat(is_max, x, src, init, window, strides, pad):
      out = np.full(x.shape, init)
      for o in np.ndindex(*src.shape):
          best = None; pos = None
          for k in np.ndindex(*window):
              p = tuple(o[i] * strides[i] + k[i] - pad[i][0] for i in range(x.ndim))
              if any(q < 0 or q >= x.shape[i] for i, q in enumerate(p)):
                  continue
              v = x[p]
              if best is None or (v >= best if is_max else v <= best):
                  best, pos = v, p
          if pos is not None:
              out[pos] += src[o]
      return out
  """

  defp flat(t), do: Nx.to_flat_list(t)

  defp close?(got, want, tol) do
    length(got) == length(want) and
      Enum.zip(got, want)
      |> Enum.all?(fn
        {a, b} when is_number(a) and is_number(b) -> abs(a - b) <= tol * (1 + abs(b))
        {a, b} -> a == b
      end)
  end

  defp random_list(n, lo, hi), do: for(_ <- 1..n, do: lo + :rand.uniform() * (hi - lo))

  defp py_list(l), do: "[" <> Enum.map_join(l, ", ", &inspect/1) <> "]"
  defp py_pad(p), do: "[" <> Enum.map_join(p, ", ", fn {a, b} -> "(#{a}, #{b})" end) <> "]"

  describe "window reductions vs numpy float64" do
    test "random shapes, strides, padding and dilations, f32 and f64, contiguous and strided" do
      :rand.seed(:exsss, {1, 2, 3})

      cases =
        for i <- 1..24 do
          rank = Enum.random(1..3)
          shape = for _ <- 1..rank, do: Enum.random(1..6)
          window = for _ <- 1..rank, do: Enum.random(1..3)
          strides = for _ <- 1..rank, do: Enum.random(1..2)
          dil = for _ <- 1..rank, do: Enum.random(1..2)

          pad =
            for {d, w, dl} <- Enum.zip([shape, window, dil]) do
              lo = Enum.random(0..2)
              hi = Enum.random(0..2)
              need = (w - 1) * dl + 1 - (d + lo + hi)
              {lo, hi + max(need, 0)}
            end

          op = Enum.at([:sum, :product, :max, :min], rem(i, 4))
          values = random_list(Enum.product(shape), 0.5, 1.5)

          %{
            i: i,
            shape: shape,
            window: window,
            strides: strides,
            dil: dil,
            pad: pad,
            op: op,
            values: values
          }
        end

      code =
        @py_ref <>
          Enum.map_join(cases, "\n", fn c ->
            "out['c#{c.i}'] = wred('#{c.op}', x#{c.i}, #{py_list(c.window)}, #{py_list(c.strides)}, #{py_pad(c.pad)}, #{py_list(c.dil)})"
          end)

      inputs = for c <- cases, do: {:"x#{c.i}", {c.values, List.to_tuple(c.shape)}}
      results = EmilyTest.Numpy.run(code, inputs)

      for c <- cases, type <- [:f32, :f64] do
        {want_shape, want} = results["c#{c.i}"]
        t = Nx.tensor(c.values, type: type) |> Nx.reshape(List.to_tuple(c.shape))
        opts = [strides: c.strides, padding: c.pad, window_dilations: c.dil]
        fun = String.to_atom("window_#{c.op}")
        got = apply(Nx, fun, [t, List.to_tuple(c.window), opts])
        assert got.shape == want_shape
        assert got.type == Nx.type(t)
        assert close?(flat(got), want, if(type == :f32, do: 1.0e-5, else: 1.0e-12)), inspect(c)

        # the same on a strided view (transpose twice keeps the values)
        if length(c.shape) >= 2 do
          r = length(c.shape)
          perm = Enum.reverse(0..(r - 1)) |> Enum.to_list()
          tv = t |> Nx.transpose(axes: perm)
          tv = wrap(Emily.Native.transpose(tv.data.ref, perm))
          got2 = apply(Nx, fun, [tv, List.to_tuple(c.window), opts])
          assert close?(flat(got2), want, if(type == :f32, do: 1.0e-5, else: 1.0e-12))
        end
      end
    end

    test "window_mean and :same padding vs numpy" do
      values = random_list(30, -2.0, 2.0)
      t = Nx.tensor(values, type: :f64) |> Nx.reshape({5, 6})

      code =
        @py_ref <>
          """
          out['m'] = wred('sum', x, [2, 3], [1, 2], [(0, 0), (0, 0)], [1, 1]) / 6
          out['s'] = wred('max', x, [3, 4], [1, 1], [(1, 1), (1, 2)], [1, 1])
          out['d'] = wred('sum', x, [2, 2], [1, 1], [(1, 1), (1, 1)], [2, 2])
          """

      r = EmilyTest.Numpy.run(code, x: {values, {5, 6}})
      m = Nx.window_mean(t, {2, 3}, strides: [1, 2])
      assert m.type == {:f, 64}
      assert close?(flat(m), elem(r["m"], 1), 1.0e-12)
      s = Nx.window_max(t, {3, 4}, padding: :same)
      assert s.shape == {5, 6}
      assert close?(flat(s), elem(r["s"], 1), 0.0)
      d = Nx.window_sum(t, {2, 2}, padding: :same, window_dilations: 2)
      assert d.shape == {5, 6}
      assert close?(flat(d), elem(r["d"], 1), 1.0e-12)
    end
  end

  describe "types" do
    test "integers keep their type, wrap, and pad max/min with the type's limits" do
      t = Nx.tensor([[100, 100], [100, 100]], type: :s8)
      assert Nx.window_sum(t, {2, 2}) |> flat() == [-112]
      assert Nx.window_sum(t, {2, 2}).type == {:s, 8}
      u = Nx.tensor([1, 2, 3], type: :u8)
      assert Nx.window_max(u, {2}, padding: [{1, 1}]) |> flat() == [1, 2, 3, 3]
      assert Nx.window_min(u, {2}, padding: [{1, 1}]) |> flat() == [1, 1, 2, 3]
      s = Nx.tensor([-1, -2], type: :s16)
      assert Nx.window_max(s, {3}, padding: [{1, 0}]) |> flat() == [-1]
      assert Nx.window_min(s, {2}, padding: [{0, 1}]) |> flat() == [-2, -2]
      assert Nx.window_product(Nx.tensor([1, 2, 3, 4], type: :u16), {2}) |> flat() == [2, 6, 12]
    end

    test "f16, bf16 and f64 floats; -Inf/Inf padding; NaN propagates" do
      for type <- [:f16, :bf16, :f32, :f64] do
        t = Nx.tensor([1.0, 2.0, 4.0], type: type)
        assert Nx.window_sum(t, {2}) |> flat() == [3.0, 6.0]
        assert Nx.window_max(t, {2}, padding: [{1, 0}]) |> flat() == [1.0, 2.0, 4.0]

        assert Nx.window_max(t, {1}, padding: [{1, 0}]) |> flat() == [
                 :neg_infinity,
                 1.0,
                 2.0,
                 4.0
               ]

        assert Nx.window_min(t, {1}, padding: [{0, 1}]) |> flat() == [1.0, 2.0, 4.0, :infinity]
        assert Nx.window_product(t, {3}) |> flat() == [8.0]
        assert Nx.window_mean(t, {2}).type == Nx.Type.normalize!(type)
      end

      n = Nx.tensor([1.0, :nan, 3.0, 4.0])
      assert Nx.window_max(n, {2}) |> flat() == [:nan, :nan, 4.0]
      assert Nx.window_min(n, {2}) |> flat() == [:nan, :nan, 3.0]
    end

    test "complex sum and product; complex max raises" do
      z =
        Nx.tensor([
          Complex.new(1.0, 1.0),
          Complex.new(2.0, -1.0),
          Complex.new(0.0, 1.0)
        ])

      assert Nx.window_sum(z, {2}) |> flat() == [
               Complex.new(3.0, 0.0),
               Complex.new(2.0, 0.0)
             ]

      assert Nx.window_product(z, {2}) |> flat() == [
               Complex.new(3.0, 1.0),
               Complex.new(1.0, 2.0)
             ]

      assert_raise ArgumentError, ~r/complex/, fn -> Nx.window_max(z, {2}) end
    end

    test "window_mean of integers is f32" do
      t = Nx.tensor([1, 2, 3, 4])
      m = Nx.window_mean(t, {2})
      assert m.type == {:f, 32}
      assert flat(m) == [1.5, 2.5, 3.5]
    end
  end

  describe "window_scatter_max/min" do
    test "random cases (many ties) vs a numpy loop, with padding and strides" do
      :rand.seed(:exsss, {4, 5, 6})

      cases =
        for i <- 1..16 do
          rank = Enum.random(1..3)
          shape = for _ <- 1..rank, do: Enum.random(1..5)
          window = for d <- shape, do: Enum.random(1..min(3, d))
          strides = for _ <- 1..rank, do: Enum.random(1..2)
          pad = for _ <- 1..rank, do: {Enum.random(0..1), Enum.random(0..1)}

          outs =
            Enum.zip_with([shape, window, strides, pad], fn [d, w, s, {lo, hi}] ->
              div(d + lo + hi - w, s) + 1
            end)

          x = for _ <- 1..Enum.product(shape), do: Enum.random(-2..2) * 1.0
          src = random_list(Enum.product(outs), -1.0, 1.0)

          %{
            i: i,
            shape: shape,
            window: window,
            strides: strides,
            pad: pad,
            outs: outs,
            x: x,
            src: src,
            max: rem(i, 2) == 0
          }
        end

      code =
        @py_ref <>
          Enum.map_join(cases, "\n", fn c ->
            "out['c#{c.i}'] = scat(#{if c.max, do: "True", else: "False"}, x#{c.i}, s#{c.i}, 0.25, " <>
              "#{py_list(c.window)}, #{py_list(c.strides)}, #{py_pad(c.pad)})"
          end)

      inputs =
        Enum.flat_map(cases, fn c ->
          [
            {:"x#{c.i}", {c.x, List.to_tuple(c.shape)}},
            {:"s#{c.i}", {c.src, List.to_tuple(c.outs)}}
          ]
        end)

      results = EmilyTest.Numpy.run(code, inputs)

      for c <- cases, xtype <- [:f32, :s32] do
        {_, want} = results["c#{c.i}"]
        x = Nx.tensor(c.x, type: :f64) |> Nx.as_type(xtype) |> Nx.reshape(List.to_tuple(c.shape))
        src = Nx.tensor(c.src, type: :f64) |> Nx.reshape(List.to_tuple(c.outs))
        fun = if c.max, do: :window_scatter_max, else: :window_scatter_min

        got =
          apply(Nx, fun, [
            x,
            src,
            0.25,
            List.to_tuple(c.window),
            [strides: c.strides, padding: c.pad]
          ])

        assert got.type == {:f, 64}
        assert got.shape == List.to_tuple(c.shape)
        assert close?(flat(got), want, 1.0e-12), inspect(c)
      end
    end
  end

  describe "errors" do
    test "bad options and shapes raise ArgumentError" do
      t = Nx.tensor([[1, 2], [3, 4]])
      assert_raise ArgumentError, ~r/rank of window/, fn -> Nx.window_sum(t, {2}) end

      assert_raise ArgumentError, ~r/rank of stride/, fn ->
        Nx.window_sum(t, {1, 1}, strides: [1])
      end

      assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.window_sum(t, {1, 1}, foo: 1) end
      assert_raise ArgumentError, ~r/empty tensor/, fn -> Nx.window_sum(t, {3, 1}) end
      assert_raise ArgumentError, ~r/padding/, fn -> Nx.window_sum(t, {1, 1}, padding: :full) end

      assert_raise ArgumentError, ~r/unknown key/, fn ->
        Nx.window_scatter_max(t, t, 0, {1, 1}, window_dilations: 2)
      end

      assert_raise ArgumentError, ~r/source/, fn ->
        Nx.window_scatter_max(t, Nx.tensor([1]), 0, {1, 1})
      end
    end
  end
end
