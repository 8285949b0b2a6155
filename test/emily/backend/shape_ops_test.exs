defmodule Emily.Backend.ShapeOpsTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias EmilyTest.Numpy

  @all_types EmilyTest.Helpers.nx_types()

  # A transposed view holding `list` (a 2-D list): the data lives
  # transposed in memory, so every op sees non-unit strides.
  defp strided(list, opts \\ []) do
    list |> transpose_list() |> Nx.tensor(opts) |> Nx.transpose()
  end

  defp transpose_list(rows), do: rows |> Enum.zip() |> Enum.map(&Tuple.to_list/1)

  describe "every dtype" do
    test "views and copies keep values and type" do
      for type <- @all_types do
        t = Nx.iota({2, 3}, type: type)
        flat = Nx.to_flat_list(t)
        assert Nx.type(Nx.reshape(t, {3, 2})) == type
        assert Nx.to_flat_list(Nx.reshape(t, {3, :auto})) == flat
        assert Nx.to_flat_list(Nx.transpose(Nx.transpose(t))) == flat
        assert Nx.to_flat_list(Nx.reverse(Nx.reverse(t))) == flat
        assert Nx.to_flat_list(Nx.squeeze(Nx.new_axis(t, 1))) == flat
        assert Nx.to_flat_list(Nx.flatten(t)) == flat

        assert Nx.to_flat_list(Nx.slice(t, [0, 1], [2, 2])) ==
                 Enum.map([1, 2, 4, 5], &Enum.at(flat, &1))

        assert Nx.to_flat_list(Nx.slice(t, [Nx.tensor(0), Nx.tensor(1)], [2, 2])) ==
                 Enum.map([1, 2, 4, 5], &Enum.at(flat, &1))

        assert Nx.type(Nx.pad(t, 0, [{1, 1, 1}, {0, 0, 0}])) == type
        assert Nx.to_flat_list(Nx.pad(t, 0, [{-1, 0, 0}, {0, 0, 0}])) == Enum.drop(flat, 3)
        assert Nx.to_flat_list(Nx.concatenate([t, t], axis: 1)) |> length() == 12
        assert Nx.to_flat_list(Nx.take_diagonal(t)) == [Enum.at(flat, 0), Enum.at(flat, 4)]

        assert Nx.to_flat_list(Nx.tile(t, [1, 2])) |> Enum.take(6) ==
                 Enum.take(flat, 3) ++ Enum.take(flat, 3)

        {a, b} = Nx.split(t, 1)
        assert Nx.to_flat_list(a) ++ Nx.to_flat_list(b) == flat
        d = Nx.make_diagonal(Nx.slice(Nx.flatten(t), [1], [2]))
        # Nx builds the diagonal with its own promotion rules (u8 gives s32).
        zero = Enum.at(flat, 0)
        assert Nx.to_flat_list(d) == [Enum.at(flat, 1), zero, zero, Enum.at(flat, 2)]
        p = Nx.put_slice(t, [1, 1], Nx.slice(t, [0, 0], [1, 2]))
        assert Nx.to_flat_list(p) == Enum.take(flat, 4) ++ Enum.slice(flat, 0, 2)
      end
    end

    test "dot of every dtype matches the integer result" do
      a = [[1, 2, 3], [4, 5, 6]]
      b = [[1, 0], [2, 1], [0, 3]]
      want = [[5, 11], [14, 23]]

      for type <- @all_types do
        r = Nx.dot(Nx.tensor(a, type: type), Nx.tensor(b, type: type))
        assert Nx.type(r) == type

        got =
          Nx.to_list(r)
          |> Enum.map(fn row -> Enum.map(row, &real_number/1) end)

        assert got == Enum.map(want, fn row -> Enum.map(row, &(&1 * 1.0)) end) or
                 got == want
      end
    end

    test "dot promotes with merge" do
      assert Nx.type(Nx.dot(Nx.tensor([1, 2], type: :u8), Nx.tensor([1, 2], type: :s8))) ==
               {:s, 16}

      assert Nx.type(Nx.dot(Nx.tensor([1, 2], type: :s64), Nx.tensor([1, 2], type: :f16))) ==
               {:f, 16}

      assert Nx.type(Nx.dot(Nx.tensor([1, 2], type: :f32), Nx.tensor([1, 2], type: :c64))) ==
               {:c, 64}

      assert Nx.to_number(Nx.dot(Nx.tensor([200, 100], type: :u8), Nx.tensor([1, 1], type: :u8))) ==
               44

      assert Nx.type(Nx.pad(Nx.tensor([1], type: :u8), 1.5, [{1, 0, 0}])) == {:f, 32}
      assert Nx.to_list(Nx.pad(Nx.tensor([1], type: :u8), 1.5, [{1, 0, 0}])) == [1.5, 1.0]

      assert Nx.type(Nx.put_slice(Nx.tensor([1, 2], type: :u8), [0], Nx.tensor([1], type: :s8))) ==
               {:s, 16}

      assert Nx.type(Nx.put_diagonal(Nx.iota({2, 2}, type: :u8), Nx.tensor([1.0, 2.0]))) ==
               {:f, 32}
    end
  end

  defp real_number(%Complex{re: re}), do: re
  defp real_number(x), do: x

  describe "strided inputs" do
    test "every op reads a transposed view correctly" do
      rows = [[1, 2, 3], [4, 5, 6]]
      s = strided(rows)
      assert Nx.to_list(s) == rows
      assert Nx.to_list(Nx.reshape(s, {3, 2})) == [[1, 2], [3, 4], [5, 6]]
      assert Nx.to_list(Nx.flatten(s)) == [1, 2, 3, 4, 5, 6]

      assert Nx.to_list(Nx.pad(s, 0, [{0, 0, 1}, {1, -1, 0}])) == [
               [0, 1, 2],
               [0, 0, 0],
               [0, 4, 5]
             ]

      assert Nx.to_list(Nx.slice(s, [0, 1], [2, 2])) == [[2, 3], [5, 6]]

      assert Nx.to_list(Nx.slice(s, [Nx.tensor(1), Nx.tensor(-3)], [1, 2], strides: [1, 2])) == [
               [4]
             ]

      assert Nx.to_list(Nx.put_slice(s, [Nx.tensor(5), Nx.tensor(0)], Nx.tensor([[7, 8]]))) == [
               [1, 2, 3],
               [7, 8, 6]
             ]

      assert Nx.to_list(Nx.put_slice(s, [0, 2], strided([[9], [10]]))) == [[1, 2, 9], [4, 5, 10]]
      assert Nx.to_list(Nx.concatenate([s, Nx.tensor([[7, 8, 9]])])) == rows ++ [[7, 8, 9]]
      assert Nx.to_list(Nx.stack([s, s], axis: 2)) |> hd() == [[1, 1], [2, 2], [3, 3]]
      assert Nx.to_list(Nx.take_diagonal(s)) == [1, 5]
      assert Nx.to_list(Nx.tile(s, [2, 1])) == rows ++ rows

      assert Nx.to_list(Nx.broadcast(Nx.slice(s, [0, 0], [1, 3]), {2, 3})) == [
               [1, 2, 3],
               [1, 2, 3]
             ]

      assert Nx.to_list(Nx.dot(s, strided([[1, 0], [0, 1], [1, 1]]))) == [[4, 5], [10, 11]]
      assert Nx.to_list(Nx.dot(s, [0], s, [0])) == [[17, 22, 27], [22, 29, 36], [27, 36, 45]]
      assert Nx.to_list(Nx.put_diagonal(s, Nx.tensor([0, 0]))) == [[0, 2, 3], [4, 0, 6]]
      assert Nx.to_list(Nx.outer(s, Nx.tensor([1, -1]))) |> Enum.take(2) == [[1, -1], [2, -2]]
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
        a = a_vals |> Nx.tensor(type: {:f, 64}) |> Nx.reshape(sa) |> Nx.as_type(type)
        b = b_vals |> Nx.tensor(type: {:f, 64}) |> Nx.reshape(sb) |> Nx.as_type(type)
        r = Nx.dot(a, ca, bax, b, cb, bax)
        {shape, values} = want["r#{i}"]
        assert Nx.shape(r) == shape, "case #{i}"
        got = r |> Nx.as_type({:f, 64}) |> Nx.to_flat_list()
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
        x = vals |> Nx.tensor(type: {:f, 64}) |> Nx.reshape(shape)
        {wshape, wvals} = want["r#{i}"]

        for input <- [x, x |> Nx.reverse() |> Nx.transpose() |> Nx.transpose() |> Nx.reverse()] do
          r = Nx.pad(input, -7.5, config)
          assert Nx.shape(r) == wshape, "case #{i} #{inspect(config)}"
          assert Nx.to_flat_list(r) == wvals, "case #{i} #{inspect(config)}"
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
    test "clamped starts" do
      t = Nx.iota({5})
      assert Nx.to_list(Nx.slice(t, [4], [2])) == [3, 4]
      assert Nx.to_list(Nx.slice(t, [-3], [2])) == [0, 1]
      assert Nx.to_list(Nx.slice(t, [Nx.tensor(-3)], [2])) == [0, 1]
      assert Nx.to_list(Nx.slice(t, [Nx.tensor(100, type: :u8)], [2])) == [3, 4]
      assert Nx.to_list(Nx.put_slice(t, [9], Nx.tensor([7, 7]))) == [0, 1, 2, 7, 7]
      assert Nx.to_list(Nx.put_slice(t, [Nx.tensor(-9)], Nx.tensor([7, 7]))) == [7, 7, 2, 3, 4]
    end
  end
end
